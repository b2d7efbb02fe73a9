//! The C surfaces beside libibverbs and librdmacm: the emulator's own controls
//! ([`control`], `VERBS_EMU_1.0`) and `libmlx5.so.1` for devices that are not
//! direct-verbs devices ([`mlx5dv`]).

pub mod control;
pub mod mlx5dv;
