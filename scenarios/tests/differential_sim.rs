//! The differential check against itself on the simulator, so it is exercised in every
//! run: the same scenario twice gives no differences, and a changed drop list does.

use proptest::prelude::*;
use scenarios::runner::{compare, run_sim};
use scenarios::Scenario;

#[test]
fn identical_runs_agree_and_a_drop_is_seen() {
    let mut s = Scenario::simple(2, 6, 5000);
    for r in &mut s.receivers {
        r.transport = scenarios::Transport::Ud;
    }
    let a = run_sim(&s).unwrap();
    assert!(compare(&a, &run_sim(&s).unwrap()).is_empty());
    s.faults.drop = vec![3];
    let b = run_sim(&s).unwrap();
    let d = compare(&a, &b);
    assert!(d.iter().any(|x| x.contains("complete heaps")), "{d:?}");
}

proptest! {
    #![proptest_config(scenarios::strategy::proptest_config(32))]
    #[test]
    fn differential_scenarios_are_deterministic(s in scenarios::strategy::ud_sender_faults_scenario()) {
        let a = run_sim(&s).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let b = run_sim(&s).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert!(compare(&a, &b).is_empty());
        let v = scenarios::check(&s, &a);
        if !v.is_empty() {
            let _ = std::fs::write(std::env::temp_dir().join("differential-failure.toml"), format!("# {v:?}\n{}", s.to_toml().unwrap_or_default()));
        }
        prop_assert!(v.is_empty(), "{:?}", v);
    }
}
