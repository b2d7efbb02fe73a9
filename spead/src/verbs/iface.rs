//! The MAC address of the host interface with a given IPv4 address (what spead2 reads
//! with SIOCGIFHWADDR), needed as the source MAC of raw frames on real hardware.

use std::net::Ipv4Addr;

use super::error::VerbsError;

/// The MAC of the interface that has `ip`, from `getifaddrs` and sysfs.
///
/// # Errors
/// [`VerbsError::Config`] when no interface has the address (on the simulator, pass the
/// simulated port's MAC instead).
pub fn interface_mac(ip: Ipv4Addr) -> Result<[u8; 6], VerbsError> {
    let name = interface_name(ip)?;
    let path = format!("/sys/class/net/{name}/address");
    let text = std::fs::read_to_string(&path).map_err(|e| {
        VerbsError::Config(format!("cannot read the MAC of {name} from {path}: {e}"))
    })?;
    parse_mac(text.trim())
        .ok_or_else(|| VerbsError::Config(format!("{path} holds {text:?}, not a MAC")))
}

fn parse_mac(text: &str) -> Option<[u8; 6]> {
    let mut out = [0u8; 6];
    let mut parts = text.split(':');
    for b in &mut out {
        *b = u8::from_str_radix(parts.next()?, 16).ok()?;
    }
    parts.next().is_none().then_some(out)
}

fn interface_name(ip: Ipv4Addr) -> Result<String, VerbsError> {
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs writes a list head into `head`, which we free below.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return Err(VerbsError::Config(format!(
            "getifaddrs: {}",
            std::io::Error::last_os_error()
        )));
    }
    let mut found = None;
    let mut cur = head;
    while !cur.is_null() {
        // SAFETY: `cur` is a node of the list getifaddrs returned, alive until freeifaddrs.
        let ifa = unsafe { &*cur };
        if !ifa.ifa_addr.is_null() {
            // SAFETY: ifa_addr points to a sockaddr of the family it declares.
            let family = i32::from(unsafe { (*ifa.ifa_addr).sa_family });
            if family == libc::AF_INET {
                // SAFETY: for AF_INET the sockaddr is a sockaddr_in.
                let sin = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in) };
                if Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)) == ip {
                    // SAFETY: ifa_name is a NUL-terminated string owned by the list.
                    let name = unsafe { std::ffi::CStr::from_ptr(ifa.ifa_name) };
                    found = Some(name.to_string_lossy().into_owned());
                    break;
                }
            }
        }
        cur = ifa.ifa_next;
    }
    // SAFETY: `head` came from getifaddrs and is freed once.
    unsafe { libc::freeifaddrs(head) };
    found.ok_or_else(|| VerbsError::Config(format!("no network interface has address {ip}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_has_a_mac_and_unknown_addresses_are_named() {
        assert_eq!(interface_mac(Ipv4Addr::LOCALHOST).unwrap(), [0; 6]);
        let e = interface_mac(Ipv4Addr::new(192, 0, 2, 77)).unwrap_err();
        assert!(e
            .to_string()
            .contains("no network interface has address 192.0.2.77"));
        assert_eq!(parse_mac("02:00:0a:00:00:01"), Some([2, 0, 10, 0, 0, 1]));
        assert_eq!(parse_mac("02:00"), None);
    }
}
