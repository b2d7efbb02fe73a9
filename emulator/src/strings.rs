//! The string helpers (`ibv_wc_status_str`, `ibv_event_type_str`, `ibv_node_type_str`,
//! `ibv_port_state_str`), with verbs-api's names, which are libibverbs'.

use std::ffi::{c_char, CString};
use std::sync::OnceLock;

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

/// `ibv_wc_status_str`.
pub extern "C" fn ibv_wc_status_str(status: u32) -> *const c_char {
    static T: OnceLock<Vec<CString>> = OnceLock::new();
    let names: Vec<&str> = WcStatus::ALL.iter().map(|s| s.as_str()).collect();
    let i = WcStatus::ALL.iter().position(|s| s.as_raw() == status);
    lookup(&T, &names, i)
}

/// `ibv_event_type_str`.
pub extern "C" fn ibv_event_type_str(event: u32) -> *const c_char {
    static T: OnceLock<Vec<CString>> = OnceLock::new();
    let names: Vec<&str> = EventType::ALL.iter().map(|s| s.as_str()).collect();
    let i = EventType::ALL.iter().position(|s| s.as_raw() == event);
    lookup(&T, &names, i)
}

/// `ibv_node_type_str`.
pub extern "C" fn ibv_node_type_str(node_type: i32) -> *const c_char {
    static T: OnceLock<Vec<CString>> = OnceLock::new();
    let names: Vec<&str> = NodeType::ALL.iter().map(|s| s.as_str()).collect();
    let i = NodeType::ALL.iter().position(|s| s.as_raw() == node_type);
    lookup(&T, &names, i)
}

/// `ibv_port_state_str`.
pub extern "C" fn ibv_port_state_str(state: u32) -> *const c_char {
    static T: OnceLock<Vec<CString>> = OnceLock::new();
    let names: Vec<&str> = PortState::ALL.iter().map(|s| s.as_str()).collect();
    let i = PortState::ALL.iter().position(|s| s.as_raw() == state);
    lookup(&T, &names, i)
}

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
