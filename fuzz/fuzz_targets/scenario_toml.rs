//! Scenario files: arbitrary text through the TOML parser and the scenario's validation.
//! A file that parses and validates must serialise and parse back to the same value.
#![no_main]

use libfuzzer_sys::fuzz_target;
use scenarios::Scenario;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(s) = Scenario::from_toml(text) else {
        return;
    };
    if s.validate().is_ok() {
        let back = Scenario::from_toml(&s.to_toml().expect("a valid scenario serialises"))
            .expect("a serialised scenario parses");
        assert_eq!(back, s);
    }
});
