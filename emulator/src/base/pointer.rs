//! From a C pointer a program passes to a reference, with its null check: the one way
//! this library does it (after rustls-ffi's `Castable` and `try_ref_from_ptr!`). A type
//! says which C type a pointer to it is ([`Castable`]); [`try_ref`] and [`try_mut`] read
//! such a pointer, `None` for NULL or for an address no object of the type can have (not
//! aligned for it: a pointer read from freed or foreign memory, as a program that uses an
//! object after destroying it passes); the macros `try_ref_from_ptr!` and
//! `try_mut_from_ptr!` return the function's error for those.
//!
//! Where a contract says a pointer is never NULL (an op the static-inline verbs call with
//! the program's live object), the unchecked casts (`objects::handles::emu`,
//! `rdmacm::core::id_state::cm_id`, `EventChannel::of`) go through the same
//! [`Castable::from_c`].

/// A Rust type that a C pointer can be read as: an object this library hands out, whose
/// C struct it starts with (or, for a context, contains), or a C struct itself.
///
/// # Safety
/// For a non-NULL pointer to a live `Self::C` that is part of a `Self` (as this library
/// hands them out, or as programs pass their C structs), [`Castable::from_c`] must return
/// a pointer to that `Self`.
pub unsafe trait Castable: Sized {
    /// The C type programs hold a pointer to.
    type C;

    /// The `Self` that `p` is part of: by default the same address (the C struct is the
    /// `#[repr(C)]` object's first field).
    fn from_c(p: *const Self::C) -> *const Self {
        p.cast()
    }
}

/// `p` read as a reference; `None` for NULL and for an address not aligned for `T` (no
/// `T` can be there: dereferencing it would be undefined, and a debug build aborts).
///
/// # Safety
/// `p` is NULL, misaligned, or points at a live `T::C` that is part of a `T` (see
/// [`Castable`]), valid for `'a` and not written meanwhile except through the `T`'s
/// interior mutability.
pub unsafe fn try_ref<'a, T: Castable>(p: *const T::C) -> Option<&'a T> {
    if p.is_null() {
        return None;
    }
    let t = T::from_c(p);
    if !t.is_aligned() {
        return None;
    }
    // SAFETY: not NULL and aligned; the caller's contract for the rest.
    Some(unsafe { &*t })
}

/// `p` read as a mutable reference; `None` for NULL and for an address not aligned for
/// `T`.
///
/// # Safety
/// As [`try_ref`], and nothing else reads or writes the `T` for `'a`.
pub unsafe fn try_mut<'a, T: Castable>(p: *mut T::C) -> Option<&'a mut T> {
    if p.is_null() {
        return None;
    }
    let t = T::from_c(p).cast_mut();
    if !t.is_aligned() {
        return None;
    }
    // SAFETY: not NULL and aligned; the caller's contract for the rest.
    Some(unsafe { &mut *t })
}

/// `try_ref_from_ptr!(p, err)`: [`try_ref`]'s reference, or `return err` from the enclosing
/// function (or closure) when `p` is NULL (`try_ref_from_ptr!(p)`: `return`). Under
/// [`try_ref`]'s contract, in an `unsafe` block.
macro_rules! try_ref_from_ptr {
    ($p:expr, $err:expr) => {
        match $crate::base::pointer::try_ref($p) {
            Some(r) => r,
            None => return $err,
        }
    };
    ($p:expr) => {
        match $crate::base::pointer::try_ref($p) {
            Some(r) => r,
            None => return,
        }
    };
}

/// `try_mut_from_ptr!(p, err)`: [`try_mut`]'s reference, or `return err` when `p` is NULL.
macro_rules! try_mut_from_ptr {
    ($p:expr, $err:expr) => {
        match $crate::base::pointer::try_mut($p) {
            Some(r) => r,
            None => return $err,
        }
    };
    ($p:expr) => {
        match $crate::base::pointer::try_mut($p) {
            Some(r) => r,
            None => return,
        }
    };
}

pub(crate) use {try_mut_from_ptr, try_ref_from_ptr};

/// C structs programs pass, read as themselves.
macro_rules! c_structs {
    ($($t:ident),* $(,)?) => {
        // SAFETY: a pointer to a C struct is a pointer to itself.
        $(unsafe impl Castable for crate::base::ffi::$t {
            type C = Self;
        })*
    };
}

c_structs!(
    ibv_ah_attr,
    ibv_async_event,
    ibv_cq_init_attr_ex,
    ibv_device_attr,
    ibv_device_attr_ex,
    ibv_flow_attr,
    ibv_gid,
    ibv_poll_cq_attr,
    ibv_mw_bind,
    ibv_parent_domain_init_attr,
    ibv_port_attr,
    ibv_qp_attr,
    ibv_qp_init_attr,
    ibv_qp_init_attr_ex,
    ibv_srq_attr,
    ibv_srq_init_attr,
    ibv_wc,
    ibv_global_route,
    ibv_grh,
    ibv_query_device_ex_input,
    rdma_addrinfo,
    rdma_cm_event,
    rdma_cm_join_mc_attr_ex,
    rdma_conn_param,
    ibv_qp_cap,
);

#[cfg(test)]
mod tests {
    use super::*;

    #[repr(C)]
    struct Outer {
        c: u32,
        rest: u64,
    }

    // SAFETY: `c` is Outer's first field.
    unsafe impl Castable for Outer {
        type C = u32;
    }

    fn read(p: *const u32) -> Result<u64, i32> {
        // SAFETY: NULL or the start of a live Outer.
        let o: &Outer = unsafe { try_ref_from_ptr!(p, Err(-1)) };
        Ok(o.rest + u64::from(o.c))
    }

    #[test]
    fn null_is_the_error_and_the_rest_is_the_object() {
        let o = Outer { c: 2, rest: 40 };
        assert_eq!(read(std::ptr::null()), Err(-1));
        assert_eq!(read(std::ptr::from_ref(&o.c)), Ok(42));
        let mut m = Outer { c: 1, rest: 0 };
        // SAFETY: the start of a live Outer that nothing else uses.
        unsafe { try_mut::<Outer>(std::ptr::from_mut(&mut m.c)) }
            .unwrap()
            .rest = 5;
        assert_eq!(m.rest, 5);
    }

    #[test]
    fn a_misaligned_address_is_the_error_not_a_dereference() {
        let o = Outer { c: 2, rest: 40 };
        let p = std::ptr::from_ref(&o.c)
            .cast::<u8>()
            .wrapping_add(1)
            .cast::<u32>();
        assert_eq!(read(p), Err(-1));
        // SAFETY: misaligned, so never dereferenced.
        assert!(unsafe { try_mut::<Outer>(p.cast_mut()) }.is_none());
    }
}
