//! Errors that name their cause and their fix. Pure functions of what was observed, so
//! they are unit-tested without a device (and compiled without the `ibverbs` feature).

use verbs_api::{Error, ErrorKind};

/// Linux errno values the backend tells apart.
pub mod errno {
    /// Operation not permitted.
    pub const EPERM: i32 = 1;
    /// No such file or directory.
    pub const ENOENT: i32 = 2;
    /// Interrupted system call.
    pub const EINTR: i32 = 4;
    /// I/O error.
    pub const EIO: i32 = 5;
    /// Try again.
    pub const EAGAIN: i32 = 11;
    /// Out of memory.
    pub const ENOMEM: i32 = 12;
    /// Permission denied.
    pub const EACCES: i32 = 13;
    /// No such device.
    pub const ENODEV: i32 = 19;
    /// Invalid argument.
    pub const EINVAL: i32 = 22;
    /// Function not implemented.
    pub const ENOSYS: i32 = 38;
    /// Operation not supported.
    pub const EOPNOTSUPP: i32 = 95;
}

/// The fix to suggest when this machine has no usable RDMA device.
pub const VM_HINT: &str = "cargo xtask test --backend hw --vm";

/// Where the kernel lists its RDMA devices.
pub const SYSFS_INFINIBAND: &str = "/sys/class/infiniband";

/// `ibv_get_device_list` failed with `errno`.
pub fn device_list_failed(errno: i32) -> Error {
    let message = if errno == errno::ENOSYS {
        format!(
            "the kernel has no RDMA support (ENOSYS): run on a machine with an RDMA NIC or \
             Soft-RoCE, e.g. `{VM_HINT}`"
        )
    } else if errno == errno::EACCES || errno == errno::EPERM {
        "cannot read the RDMA device list: check the permissions of /sys/class/infiniband_verbs \
         and /dev/infiniband"
            .to_string()
    } else {
        format!("cannot list RDMA devices (errno {errno})")
    };
    let kind = if errno == errno::ENOSYS {
        ErrorKind::NoDevice
    } else {
        ErrorKind::from_errno(errno)
    };
    Error::new(kind, "ibv_get_device_list", message).with_errno(errno)
}

/// `ibv_get_device_list` returned no device; `sysfs` lists `/sys/class/infiniband`.
pub fn no_devices(sysfs: &[String]) -> Error {
    let message = if sysfs.is_empty() {
        format!(
            "no RDMA device: create one with `rdma link add rxe0 type rxe netdev IFACE` \
             (Soft-RoCE) or use `{VM_HINT}`"
        )
    } else {
        format!(
            "the kernel has RDMA device(s) {} but libibverbs has no userspace provider for \
             them: apt-get install ibverbs-providers",
            sysfs.join(", ")
        )
    };
    Error::new(ErrorKind::NoDevice, "ibv_get_device_list", message)
}

/// Opening `name` failed because no device has that name; `existing` are the devices that
/// do exist.
pub fn unknown_device(name: &str, existing: &[String]) -> Error {
    Error::new(
        ErrorKind::NoDevice,
        "ibv_open_device",
        format!(
            "no RDMA device named `{name}`; the devices here are: {} (set RDMA_DEVICE to one \
             of them)",
            existing.join(", ")
        ),
    )
    .with_errno(errno::ENODEV)
}

/// Opening `name` failed with `errno`.
pub fn open_failed(name: &str, errno: i32) -> Error {
    let message = if errno == errno::EACCES || errno == errno::EPERM {
        format!(
            "cannot open {name}: no access to its /dev/infiniband/uverbs* file; run as root, \
             or add the user to the group owning it (often `rdma`)"
        )
    } else {
        format!("cannot open {name} (errno {errno})")
    };
    Error::from_errno("ibv_open_device", errno, message)
}

/// A RAW_PACKET QP was refused with EPERM.
pub fn raw_packet_permission() -> Error {
    Error::new(
        ErrorKind::PermissionDenied,
        "ibv_create_qp",
        "RAW_PACKET QPs need CAP_NET_RAW: run as root or `setcap cap_net_raw+ep` on the binary",
    )
    .with_errno(errno::EPERM)
}

/// The device `name` has no raw Ethernet QPs.
pub fn raw_packet_unsupported(name: &str) -> Error {
    Error::new(
        ErrorKind::Unsupported,
        "ibv_create_qp",
        format!(
            "{name} does not offer RAW_PACKET QPs (max_raw_ethy_qp 0, no raw packet caps, no \
             managed flow steering; Soft-RoCE is such a device): use UD multicast, the \
             simulator, or a NIC with raw Ethernet QPs such as mlx5"
        ),
    )
}

/// The device `name` has no managed flow steering.
pub fn flow_unsupported(name: &str) -> Error {
    Error::new(
        ErrorKind::Unsupported,
        "ibv_create_flow",
        format!(
            "{name} has no managed flow steering (device cap MANAGED_FLOW_STEERING; Soft-RoCE \
             has none): use UD multicast, the simulator, or a NIC with flow steering such as \
             mlx5"
        ),
    )
}

/// The entries of `/sys/class/infiniband` (kernel RDMA devices), sorted; empty when the
/// folder does not exist.
pub fn sysfs_devices() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(SYSFS_INFINIBAND)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enosys_names_cause_and_fix() {
        let e = device_list_failed(errno::ENOSYS);
        assert_eq!(e.kind(), ErrorKind::NoDevice);
        assert_eq!(e.errno(), Some(38));
        assert!(e.message().contains("no RDMA support (ENOSYS)"), "{e}");
        assert!(e.message().contains("--vm"), "{e}");
        assert_eq!(
            device_list_failed(errno::EACCES).kind(),
            ErrorKind::PermissionDenied
        );
    }

    #[test]
    fn empty_list_tells_provider_from_device() {
        let e = no_devices(&["rxe0".to_string()]);
        assert_eq!(e.kind(), ErrorKind::NoDevice);
        assert!(
            e.message().contains("apt-get install ibverbs-providers"),
            "{e}"
        );
        assert!(e.message().contains("rxe0"), "{e}");
        let e = no_devices(&[]);
        assert_eq!(e.kind(), ErrorKind::NoDevice);
        assert!(
            e.message().contains("rdma link add rxe0 type rxe netdev"),
            "{e}"
        );
        assert!(e.message().contains("--vm"), "{e}");
    }

    #[test]
    fn unknown_device_lists_the_existing_ones() {
        let e = unknown_device("mlx5_9", &["rxe0".to_string(), "mlx5_0".to_string()]);
        assert_eq!(e.kind(), ErrorKind::NoDevice);
        assert!(e.message().contains("`mlx5_9`"), "{e}");
        assert!(e.message().contains("rxe0, mlx5_0"), "{e}");
    }

    #[test]
    fn raw_packet_and_flow_errors() {
        let e = raw_packet_permission();
        assert_eq!(e.kind(), ErrorKind::PermissionDenied);
        assert!(e.message().contains("CAP_NET_RAW"));
        assert!(e.message().contains("setcap cap_net_raw+ep"));
        let e = raw_packet_unsupported("rxe0");
        assert_eq!(e.kind(), ErrorKind::Unsupported);
        assert!(e.message().starts_with("rxe0 does not offer RAW_PACKET"));
        let e = flow_unsupported("rxe0");
        assert_eq!(e.kind(), ErrorKind::Unsupported);
        assert!(e.message().contains("MANAGED_FLOW_STEERING"));
        assert_eq!(
            open_failed("rxe0", errno::EACCES).kind(),
            ErrorKind::PermissionDenied
        );
    }
}
