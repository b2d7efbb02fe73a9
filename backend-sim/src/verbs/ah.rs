//! Address handles: the resolved address vector a UD send carries.

use verbs_api::{AddressHandle, AhAttr};

/// An address handle.
#[derive(Debug, Clone)]
pub struct SimAh {
    pub(crate) attr: AhAttr,
}

impl AddressHandle for SimAh {
    fn attr(&self) -> AhAttr {
        self.attr
    }
}
