//! Where the interop runs happen: the topology, the VM's and the emulated hosts'
//! addresses and MACs, their link-local GIDs, the TCP port and the time a case may take.

use std::net::Ipv4Addr;
use std::time::Duration;

/// The topology of the plain run.
pub const TOPOLOGY: &str = "emulator/topologies/vm-on-fabric.toml";
/// The VM's address on the fabric (a remote host of [`TOPOLOGY`]).
pub const VM_IP: &str = "10.100.0.20";
/// The emulated host the verbs programs run as (the rxe personality).
pub const HOST: &str = "h1";
/// h1's address.
pub const HOST_IP: &str = "10.100.0.1";
/// The emulated mlx5 host of the SPEAD cases (RAW_PACKET QPs).
pub const SPEAD_HOST: &str = "h2";
/// h2's address.
pub const SPEAD_HOST_IP: &str = "10.100.0.2";
/// The host as the guest sees it on QEMU's user-mode network.
pub const HOST_FROM_GUEST: &str = "10.0.2.2";
/// The TCP port of every case (one case at a time).
pub const PORT: u16 = 18600;
/// The longest a case's VM or host program may take (a bound, not a measure: a case
/// takes 10-50 s on a quiet host).
pub const CASE_TIMEOUT: Duration = Duration::from_secs(300);

/// The MAC the emulator gives the host of `ip` (and `cargo xtask vm --fabric` the VM's
/// NIC): 02:00 and the address's four bytes (`crate::vm::qemu::FabricNic::mac`).
pub fn mac_of(ip: &str) -> String {
    crate::vm::qemu::FabricNic {
        socket: std::path::PathBuf::new(),
        ip: ip.parse().unwrap_or(Ipv4Addr::UNSPECIFIED),
        forward: vec![],
    }
    .mac()
}

/// The link-local IPv6 address (modified EUI-64 of its MAC, RFC 4291 appendix A) of the
/// host of `ip`, as `inet_ntop` prints it: GID 0 of rxe in the VM (the kernel's default
/// `addr_gen_mode` 0) and of the emulated NIC.
pub fn link_local_of(ip: &str) -> String {
    let m: Vec<u8> = mac_of(ip)
        .split(':')
        .map(|x| u8::from_str_radix(x, 16).unwrap_or(0))
        .collect();
    let mut mac = [0u8; 6];
    mac.copy_from_slice(&m);
    netwire::ipv6::link_local_of_mac(mac).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_vm_and_h1_have_the_emulators_macs_and_their_eui64_link_locals() {
        assert_eq!(mac_of(VM_IP), "02:00:0a:64:00:14");
        assert_eq!(mac_of(HOST_IP), "02:00:0a:64:00:01");
        assert_eq!(link_local_of(VM_IP), "fe80::aff:fe64:14");
        assert_eq!(link_local_of(HOST_IP), "fe80::aff:fe64:1");
    }
}
