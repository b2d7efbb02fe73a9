//! The string helpers (`ibv_wc_status_str`, `ibv_event_type_str`, `ibv_node_type_str`,
//! `ibv_port_state_str`), with verbs-api's names, which are libibverbs'.

use std::ffi::{c_char, CString};
use std::sync::OnceLock;

use crate::base::boundary::{boundary, Value};
use verbs_api::{EventType, NodeType, PortState, WcStatus};

/// NUL-terminated copies of `names`, made once, indexed like them.
fn table(cell: &'static OnceLock<Vec<CString>>, names: &[&str]) -> &'static [CString] {
    cell.get_or_init(|| {
        names
            .iter()
            .map(|n| CString::new(*n).unwrap_or_default())
            .collect()
    })
}

static UNKNOWN: &std::ffi::CStr = c"unknown";

fn lookup(
    cell: &'static OnceLock<Vec<CString>>,
    names: &[&str],
    index: Option<usize>,
) -> *const c_char {
    index
        .and_then(|i| table(cell, names).get(i))
        .map_or(UNKNOWN.as_ptr(), |s| s.as_ptr())
}

/// Defines `$name(raw) -> const char *`: the name of the `$ty` value `raw`, "unknown"
/// for a value libibverbs does not define.
macro_rules! name_fn {
    ($(#[$doc:meta])* $name:ident, $ty:ident, $raw:ty) => {
        $(#[$doc])*
        pub extern "C" fn $name(raw: $raw) -> *const c_char {
            static T: OnceLock<Vec<CString>> = OnceLock::new();
            boundary(Value(c"unknown".as_ptr()), move || {
            let names: Vec<&str> = $ty::ALL.iter().map(|s| s.as_str()).collect();
            let i = $ty::ALL.iter().position(|s| s.as_raw() == raw);
            lookup(&T, &names, i)
            })
        }
    };
}

name_fn!(
    /// `ibv_wc_status_str`.
    ibv_wc_status_str, WcStatus, u32
);
name_fn!(
    /// `ibv_event_type_str`.
    ibv_event_type_str, EventType, u32
);
name_fn!(
    /// `ibv_node_type_str`.
    ibv_node_type_str, NodeType, i32
);
name_fn!(
    /// `ibv_port_state_str`.
    ibv_port_state_str, PortState, u32
);

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CStr;

    fn s(p: *const c_char) -> &'static str {
        // SAFETY: the helpers return static NUL-terminated strings.
        unsafe { CStr::from_ptr(p) }.to_str().unwrap()
    }

    #[test]
    fn names_are_libibverbs_names() {
        assert_eq!(s(ibv_wc_status_str(5)), "Work Request Flushed Error");
        assert_eq!(s(ibv_wc_status_str(0)), "success");
        assert_eq!(s(ibv_wc_status_str(99)), "unknown");
        assert_eq!(s(ibv_port_state_str(4)), "active");
        assert_eq!(s(ibv_node_type_str(1)), "InfiniBand channel adapter");
        assert_eq!(s(ibv_node_type_str(-7)), "unknown");
    }
}
