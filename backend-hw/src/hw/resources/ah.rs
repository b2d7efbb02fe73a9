//! Address handles (`struct ibv_ah`).

use std::fmt;
use std::ptr::NonNull;
use std::sync::Arc;

use verbs_api::{AddressHandle, AhAttr, Result};

use super::pd::{HwPd, Pd};
use crate::ffi;
use crate::hw::convert;
use crate::hw::ctx::{null, os_error};

pub(crate) struct Ah {
    pub(crate) ptr: NonNull<ffi::ibv_ah>,
    attr: AhAttr,
    _pd: Arc<Pd>,
}

// SAFETY: libibverbs AHs may be used from any thread; Ah only destroys in Drop.
unsafe impl Send for Ah {}
// SAFETY: as for Send.
unsafe impl Sync for Ah {}

impl Drop for Ah {
    fn drop(&mut self) {
        // SAFETY: the AH is destroyed once; post_send's contract keeps it alive until the
        // sends that name it complete.
        let _ = unsafe { ffi::shim_destroy_ah(self.ptr.as_ptr()) };
    }
}

/// An address handle (`struct ibv_ah`): a UD destination.
#[derive(Clone)]
pub struct HwAh(pub(crate) Arc<Ah>);

impl fmt::Debug for HwAh {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("HwAh").field(&self.0.attr).finish()
    }
}

impl HwAh {
    pub(crate) fn create(pd: &HwPd, attr: &AhAttr) -> Result<Self> {
        const OP: &str = "ibv_create_ah";
        let raw = convert::ah_to_shim(attr);
        let mut ptr = std::ptr::null_mut();
        // SAFETY: the PD is alive; `raw` and the output are valid.
        let ret = unsafe { ffi::shim_create_ah(pd.0.ptr.as_ptr(), &raw, &mut ptr) };
        if ret != 0 {
            return Err(os_error(
                OP,
                ret,
                format!(
                    "to {} from port {} GID index {}",
                    attr.grh.dgid, attr.port_num, attr.grh.sgid_index
                ),
            ));
        }
        let ptr = NonNull::new(ptr).ok_or_else(|| null(OP))?;
        Ok(HwAh(Arc::new(Ah {
            ptr,
            attr: *attr,
            _pd: pd.0.clone(),
        })))
    }
}

impl AddressHandle for HwAh {
    fn attr(&self) -> AhAttr {
        self.0.attr
    }
}
