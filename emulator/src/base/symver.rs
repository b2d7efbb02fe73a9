//! Symbol versions for exported functions, as rdma-core's `.symver`s make them. Each entry
//! of a `symbol_versions!` table defines, in assembly, the versioned symbol
//! `NAME@@VERSION` (the default version) as a jump to the Rust function. The Rust
//! functions themselves are not exported: rustc's own version script would list them as
//! global without a version, and a `.symver` cannot reach a function in another codegen
//! unit. `libibverbs.map` defines the version nodes.

/// Defines the versioned symbols of a table of `NAME = PATH => "VERSION",` entries, and
/// `pub const EXPORTS`, the table as `(name, version)` pairs.
macro_rules! symbol_versions {
    ($($name:ident = $path:path => $ver:literal,)*) => {
        std::arch::global_asm!(
            ".pushsection .text,\"ax\",@progbits",
            $(
                concat!(".globl \"", stringify!($name), "@@", $ver, "\""),
                concat!(".type \"", stringify!($name), "@@", $ver, "\", @function"),
                concat!("\"", stringify!($name), "@@", $ver, "\":"),
                concat!("jmp {", stringify!($name), "}"),
            )*
            ".popsection",
            $($name = sym $path,)*
        );

        /// Every exported function and its version node, as programs link to them.
        pub const EXPORTS: &[(&str, &str)] = &[$((stringify!($name), $ver),)*];
    };
}

// The tables of crate::symbols, extras::control and extras::mlx5dv use it.
pub(crate) use symbol_versions;
