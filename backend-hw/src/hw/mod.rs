//! The libibverbs backend: [`HwVerbs`] and [`HwContext`] (its device context in [`ctx`]);
//! the resources are in [`resources`] and [`qp`].

mod convert;
mod ctx;
mod qp;
mod resources;
mod wq;

use std::collections::HashMap;
use std::ffi::CString;
use std::os::raw::c_int;
use std::ptr::NonNull;
use std::sync::{Arc, Mutex};

use verbs_api::{
    AccessFlags, AhAttr, AsyncEvent, Context, DeviceAttr, DeviceCapFlags, DeviceInfo, Error,
    ErrorKind, EventElement, EventType, FlowAttr, FlowRuleType, Gid, LinkLayer, MwBind, MwType,
    NodeType, PortAttr, PortState, QpInitAttr, QpType, Result, SrqInitAttr, TransportType, Verbs,
};

use crate::diagnose::{self, errno};
use crate::ffi;

pub use ctx::HwContext;
pub(crate) use ctx::{invalid, os_error, Ctx};
pub use qp::{HwFlow, HwQp};
pub use resources::{HwAh, HwCompChannel, HwCq, HwMr, HwMw, HwPd, HwSrq};
pub use wq::{HwRwqIndTable, HwWq};

/// The environment variable naming the device [`HwVerbs::open_default`] opens (and that
/// the device tests run on).
pub const DEVICE_ENV: &str = "RDMA_DEVICE";

/// The libibverbs provider: lists and opens devices.
#[derive(Debug, Default, Clone, Copy)]
pub struct HwVerbs;

impl HwVerbs {
    /// A provider over the system's libibverbs.
    pub fn new() -> Self {
        HwVerbs
    }

    /// Opens the device named by the `RDMA_DEVICE` environment variable or, when it is
    /// not set, the first device that has an active port.
    ///
    /// # Errors
    /// [`ErrorKind::NoDevice`] naming the cause and the fix when there is no device, no
    /// such device, or no device with an active port.
    pub fn open_default(&self) -> Result<HwContext> {
        if let Ok(name) = std::env::var(DEVICE_ENV) {
            if !name.is_empty() {
                return self.open(&name);
            }
        }
        let devices = self.devices()?;
        let mut seen = Vec::new();
        for d in &devices {
            let ctx = self.open(&d.name)?;
            let ports = ctx.query_device()?.phys_port_cnt;
            for p in 1..=ports {
                if ctx.query_port(p)?.state == PortState::Active {
                    return Ok(ctx);
                }
            }
            seen.push(d.name.clone());
        }
        Err(Error::new(
            ErrorKind::NoDevice,
            "HwVerbs::open_default",
            format!(
                "no RDMA device has an active port (devices: {}); bring the link up \
                 (`ip link set IFACE up`) or set {DEVICE_ENV}",
                seen.join(", ")
            ),
        ))
    }

    fn list(&self) -> Result<Vec<ffi::shim_device_info>> {
        let mut cap = 16usize;
        loop {
            // SAFETY: shim_device_info is plain data (arrays and integers); all-zero is valid.
            let mut buf = vec![unsafe { std::mem::zeroed::<ffi::shim_device_info>() }; cap];
            let mut n: c_int = 0;
            let cap_c = c_int::try_from(cap).unwrap_or(c_int::MAX);
            // SAFETY: `buf` has room for `cap` entries; the shim writes at most that many
            // and stores the total count in `n`.
            let ret = unsafe { ffi::shim_get_device_list(buf.as_mut_ptr(), cap_c, &mut n) };
            if ret != 0 {
                return Err(diagnose::device_list_failed(ret));
            }
            let n = usize::try_from(n).unwrap_or(0);
            if n <= cap {
                buf.truncate(n);
                return Ok(buf);
            }
            cap = n;
        }
    }
}

/// True when the device is the kernel's: its `dev_path` (`/sys/class/infiniband_verbs/
/// uverbsN`, which libibverbs reads the device list from) exists.
fn on_host_network(d: &ffi::shim_device_info) -> bool {
    let path = c_name(&d.dev_path);
    !path.is_empty() && std::path::Path::new(&path).exists()
}

fn c_name(raw: &[std::os::raw::c_char]) -> String {
    let bytes: Vec<u8> = raw
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c.to_ne_bytes()[0])
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

impl Verbs for HwVerbs {
    type Context = HwContext;

    /// A kernel device (one with a uverbs directory in sysfs) sits on the host's network,
    /// so multicast receivers join on the host. A library whose devices have none (the
    /// emulated libibverbs of `emulator/`, whose hosts' addresses are the fabric's) does
    /// not: a host join would fail (ENODEV) or subscribe the real machine.
    fn joins_host_multicast(&self) -> bool {
        self.list().map_or(true, |list| {
            list.is_empty() || list.iter().any(on_host_network)
        })
    }

    fn devices(&self) -> Result<Vec<DeviceInfo>> {
        let list = self.list()?;
        if list.is_empty() {
            return Err(diagnose::no_devices(&diagnose::sysfs_devices()));
        }
        Ok(list
            .iter()
            .map(|d| DeviceInfo {
                name: c_name(&d.name),
                guid: d.guid,
                node_type: NodeType::from_raw(d.node_type).unwrap_or(NodeType::Unknown),
                transport_type: TransportType::from_raw(d.transport_type)
                    .unwrap_or(TransportType::Unknown),
            })
            .collect())
    }

    fn open(&self, name: &str) -> Result<HwContext> {
        let cname = CString::new(name)
            .map_err(|_| invalid("ibv_open_device", "a device name has no NUL byte"))?;
        let mut ptr: *mut ffi::ibv_context = std::ptr::null_mut();
        let mut info = ffi::shim_context_info::default();
        // SAFETY: `cname` is a NUL-terminated string; `ptr` and `info` are valid outputs.
        let ret = unsafe { ffi::shim_open_device(cname.as_ptr(), &mut ptr, &mut info) };
        if ret == errno::ENODEV {
            let existing: Vec<String> = self.devices()?.into_iter().map(|d| d.name).collect();
            return Err(diagnose::unknown_device(name, &existing));
        }
        if ret != 0 {
            return Err(match ret {
                errno::ENOSYS => diagnose::device_list_failed(ret),
                _ => diagnose::open_failed(name, ret),
            });
        }
        let ptr = NonNull::new(ptr)
            .ok_or_else(|| Error::new(ErrorKind::Io, "ibv_open_device", "got a null context"))?;
        let device = self
            .devices()?
            .into_iter()
            .find(|d| d.name == name)
            .unwrap_or(DeviceInfo {
                name: name.to_string(),
                guid: 0,
                node_type: NodeType::Unknown,
                transport_type: TransportType::Unknown,
            });
        let on_host_network = self
            .list()?
            .iter()
            .find(|d| c_name(&d.name) == name)
            .is_none_or(on_host_network);
        Ok(HwContext {
            inner: Arc::new(Ctx {
                ptr,
                device,
                on_host_network,
                num_comp_vectors: u32::try_from(info.num_comp_vectors).unwrap_or(0),
                attr: Mutex::new(None),
                mrs: Mutex::new(HashMap::new()),
                mws: Mutex::new(HashMap::new()),
            }),
        })
    }
}

impl HwContext {
    /// The GID type of entry `index` of `port_num`'s table (`ibv_query_gid_ex`):
    /// `"IB"`, `"RoCE v1"` or `"RoCE v2"`.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidArgument`] or [`ErrorKind::NotFound`] for an unused entry or a
    /// bad port.
    pub fn query_gid_type(&self, port_num: u8, index: u32) -> Result<&'static str> {
        let mut t = 0u32;
        // SAFETY: the context is open; `t` is a valid output.
        let ret =
            unsafe { ffi::shim_query_gid_type(self.inner.ptr.as_ptr(), port_num, index, &mut t) };
        if ret != 0 {
            return Err(os_error(
                "ibv_query_gid_ex",
                ret,
                format!("port {port_num} GID index {index}"),
            ));
        }
        Ok(match t {
            0 => "IB",
            1 => "RoCE v1",
            2 => "RoCE v2",
            _ => "unknown",
        })
    }
}

impl Context for HwContext {
    type Pd = HwPd;
    type Mr = HwMr;
    type Mw = HwMw;
    type CompChannel = HwCompChannel;
    type Cq = HwCq;
    type Srq = HwSrq;
    type Qp = HwQp;
    type Ah = HwAh;
    type Flow = HwFlow;
    type Wq = HwWq;
    type RwqIndTable = HwRwqIndTable;

    fn device(&self) -> DeviceInfo {
        self.inner.device.clone()
    }

    fn query_device(&self) -> Result<DeviceAttr> {
        self.inner.attr()
    }

    fn query_port(&self, port_num: u8) -> Result<PortAttr> {
        let mut raw = ffi::shim_port_attr::default();
        // SAFETY: the context is open; `raw` is a valid output.
        let ret = unsafe { ffi::shim_query_port(self.inner.ptr.as_ptr(), port_num, &mut raw) };
        if ret != 0 {
            return Err(os_error(
                "ibv_query_port",
                ret,
                format!("{} port {port_num}", self.inner.name()),
            ));
        }
        Ok(convert::port_attr(&raw))
    }

    fn query_gid(&self, port_num: u8, index: u32) -> Result<Gid> {
        let idx = c_int::try_from(index)
            .map_err(|_| invalid("ibv_query_gid", format!("GID index {index} is too large")))?;
        let mut gid = [0u8; 16];
        // SAFETY: the context is open; `gid` has the 16 bytes the shim writes.
        let ret = unsafe {
            ffi::shim_query_gid(self.inner.ptr.as_ptr(), port_num, idx, gid.as_mut_ptr())
        };
        if ret != 0 {
            return Err(os_error(
                "ibv_query_gid",
                ret,
                format!("{} port {port_num} GID index {index}", self.inner.name()),
            ));
        }
        Ok(Gid(gid))
    }

    fn alloc_pd(&self) -> Result<HwPd> {
        HwPd::alloc(&self.inner)
    }

    fn alloc_mr(&self, pd: &HwPd, len: usize, access: AccessFlags) -> Result<HwMr> {
        self.inner.same(pd.ctx(), "ibv_reg_mr")?;
        HwMr::alloc(pd, len, access)
    }

    unsafe fn reg_mr(
        &self,
        pd: &HwPd,
        addr: *mut u8,
        len: usize,
        access: AccessFlags,
    ) -> Result<HwMr> {
        self.inner.same(pd.ctx(), "ibv_reg_mr")?;
        // SAFETY: the caller upholds reg_mr's contract (valid memory outliving the region).
        unsafe { HwMr::register(pd, addr, len, access, None) }
    }

    fn alloc_mw(&self, pd: &HwPd, mw_type: MwType) -> Result<HwMw> {
        self.inner.same(pd.ctx(), "ibv_alloc_mw")?;
        HwMw::alloc(pd, mw_type)
    }

    fn bind_mw(&self, qp: &HwQp, mw: &HwMw, bind: &MwBind) -> Result<u32> {
        self.inner.same(qp.ctx(), "ibv_bind_mw")?;
        mw.bind(qp, bind)
    }

    fn create_comp_channel(&self) -> Result<HwCompChannel> {
        HwCompChannel::create(&self.inner)
    }

    fn create_cq(
        &self,
        cqe: u32,
        channel: Option<&HwCompChannel>,
        comp_vector: u32,
    ) -> Result<HwCq> {
        const OP: &str = "ibv_create_cq";
        // Sizes and the vector go to the device unchecked: it decides (rxe: EINVAL for 0
        // or more than max_cqe entries).
        if let Some(ch) = channel {
            self.inner.same(ch.ctx(), OP)?;
        }
        HwCq::create(&self.inner, cqe, channel, comp_vector)
    }

    fn create_srq(&self, pd: &HwPd, attr: &SrqInitAttr) -> Result<HwSrq> {
        const OP: &str = "ibv_create_srq";
        self.inner.same(pd.ctx(), OP)?;
        HwSrq::create(pd, attr)
    }

    fn create_qp(&self, pd: &HwPd, init: &QpInitAttr<'_, HwCq, HwSrq>) -> Result<HwQp> {
        const OP: &str = "ibv_create_qp";
        self.inner.same(pd.ctx(), OP)?;
        self.inner.same(init.send_cq.ctx(), OP)?;
        self.inner.same(init.recv_cq.ctx(), OP)?;
        if let Some(srq) = init.srq {
            self.inner.same(srq.ctx(), OP)?;
        }
        let dev = self.inner.attr()?;
        let name = self.inner.name();
        if init.qp_type == QpType::RawPacket && !has_raw_packet(&dev) {
            return Err(diagnose::raw_packet_unsupported(name));
        }
        HwQp::create(pd, init)
    }

    fn create_ah(&self, pd: &HwPd, attr: &AhAttr) -> Result<HwAh> {
        const OP: &str = "ibv_create_ah";
        self.inner.same(pd.ctx(), OP)?;
        if !attr.is_global {
            let port = self.query_port(attr.port_num)?;
            if port.link_layer == LinkLayer::Ethernet {
                return Err(invalid(
                    OP,
                    format!(
                        "port {} of {} is Ethernet (RoCE): an address handle needs a GRH \
                         (is_global with a destination GID, e.g. AhAttr::roce)",
                        attr.port_num,
                        self.inner.name()
                    ),
                ));
            }
        }
        HwAh::create(pd, attr)
    }

    fn create_flow(&self, qp: &HwQp, attr: &FlowAttr) -> Result<HwFlow> {
        const OP: &str = "ibv_create_flow";
        self.inner.same(qp.ctx(), OP)?;
        let dev = self.inner.attr()?;
        if !dev
            .device_cap_flags
            .contains(DeviceCapFlags::MANAGED_FLOW_STEERING)
        {
            return Err(diagnose::flow_unsupported(self.inner.name()));
        }
        if attr.rule_type == FlowRuleType::Normal && attr.specs.is_empty() {
            return Err(invalid(OP, "a NORMAL flow rule needs at least one spec"));
        }
        if attr.port == 0 || attr.port > dev.phys_port_cnt {
            return Err(invalid(
                OP,
                format!(
                    "{} has {} port(s); port {} does not exist",
                    self.inner.name(),
                    dev.phys_port_cnt,
                    attr.port
                ),
            ));
        }
        HwFlow::create(qp, attr)
    }

    fn poll_async_event(&self) -> Result<Option<AsyncEvent>> {
        loop {
            let mut ev = ffi::shim_async_event::default();
            let mut got: c_int = 0;
            // SAFETY: the context is open; `ev` and `got` are valid outputs. The shim acks
            // the event before returning, so no libibverbs object is referenced afterwards.
            let ret =
                unsafe { ffi::shim_get_async_event(self.inner.ptr.as_ptr(), &mut ev, &mut got) };
            if ret != 0 {
                return Err(os_error(
                    "ibv_get_async_event",
                    ret,
                    format!("{} async event", self.inner.name()),
                ));
            }
            if got == 0 {
                return Ok(None);
            }
            // An event type newer than verbs-api knows is skipped (it has no name to give).
            let Some(event_type) = EventType::from_raw(ev.event_type) else {
                continue;
            };
            let element = match ev.element_kind {
                ffi::ELEMENT_CQ => EventElement::Cq(ev.element),
                ffi::ELEMENT_QP => EventElement::Qp(ev.element),
                ffi::ELEMENT_SRQ => EventElement::Srq(ev.element),
                ffi::ELEMENT_PORT => EventElement::Port(u8::try_from(ev.element).unwrap_or(0)),
                _ => EventElement::Device,
            };
            return Ok(Some(AsyncEvent {
                event_type,
                element,
            }));
        }
    }

    fn create_wq(&self, pd: &HwPd, cq: &HwCq, attr: &verbs_api::WqInitAttr) -> Result<HwWq> {
        const OP: &str = "ibv_create_wq";
        self.inner.same(pd.ctx(), OP)?;
        self.inner.same(cq.ctx(), OP)?;
        HwWq::create(pd, cq, attr)
    }

    fn create_rwq_ind_table(&self, wqs: &[&HwWq]) -> Result<HwRwqIndTable> {
        let has_wqs = has_raw_packet(&self.inner.attr()?);
        HwRwqIndTable::create(&self.inner, wqs, has_wqs)
    }

    fn create_rss_qp(
        &self,
        pd: &HwPd,
        table: &HwRwqIndTable,
        hash: &verbs_api::RxHashConf,
    ) -> Result<HwQp> {
        const OP: &str = "ibv_create_qp_ex";
        self.inner.same(pd.ctx(), OP)?;
        self.inner.same(&table.0.ctx, OP)?;
        HwQp::create_rss(pd, table, hash)
    }
}

/// Whether a device offers raw Ethernet QPs: rxe has none of these indications.
fn has_raw_packet(dev: &DeviceAttr) -> bool {
    dev.max_raw_ethy_qp > 0
        || !dev.raw_packet_caps.is_empty()
        || dev
            .device_cap_flags
            .contains(DeviceCapFlags::MANAGED_FLOW_STEERING)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On a machine without RDMA (ours: the kernel has none), listing and opening fail
    /// with NoDevice and a message that names the cause and the fix; on a machine with a
    /// device, listing works and an unknown name lists the real ones.
    #[test]
    fn no_device_errors_name_cause_and_fix() {
        let verbs = HwVerbs::new();
        match verbs.devices() {
            Ok(list) => {
                assert!(!list.is_empty());
                let e = verbs.open("no_such_device_9").unwrap_err();
                assert_eq!(e.kind(), ErrorKind::NoDevice, "{e}");
                assert!(e.message().contains(&list[0].name), "{e}");
            }
            Err(e) => {
                assert_eq!(e.kind(), ErrorKind::NoDevice, "{e}");
                let m = e.message();
                assert!(
                    m.contains("(ENOSYS)")
                        || m.contains("apt-get install ibverbs-providers")
                        || m.contains("rdma link add rxe0"),
                    "{e}"
                );
                assert!(m.contains("--vm") || m.contains("ibverbs-providers"), "{e}");
                let o = verbs.open("rxe0").unwrap_err();
                assert_eq!(o.kind(), ErrorKind::NoDevice, "{o}");
                assert_eq!(o.message(), m, "open explains the same missing support");
                let d = verbs.open_default().unwrap_err();
                assert_eq!(d.kind(), ErrorKind::NoDevice, "{d}");
            }
        }
    }

    #[test]
    fn resources_cross_threads() {
        fn send_sync<T: Send + Sync>() {}
        fn send<T: Send>() {}
        send_sync::<HwVerbs>();
        send_sync::<HwContext>();
        send_sync::<HwPd>();
        send_sync::<HwCompChannel>();
        send_sync::<HwCq>();
        send_sync::<HwSrq>();
        send_sync::<HwQp>();
        send_sync::<HwAh>();
        send_sync::<HwFlow>();
        send_sync::<HwWq>();
        send_sync::<HwRwqIndTable>();
        send::<HwMr>();
        send::<HwMw>();
    }

    #[test]
    fn device_names_with_nul_are_rejected() {
        let e = HwVerbs::new().open("rx\0e0").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    }
}
