//! A macro for enums that mirror a libibverbs C enum: same variant names (in Rust case),
//! same numeric values, conversion from and to the raw value, and the libibverbs string.

/// Declares an enum with libibverbs' numeric values, `from_raw`, `as_raw` and `as_str`.
macro_rules! verbs_enum {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident : $raw:ty {
            $( $(#[$vmeta:meta])* $variant:ident = $value:expr => $text:expr, )+
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr($raw)]
        $vis enum $name {
            $( $(#[$vmeta])* $variant = $value, )+
        }

        impl $name {
            /// Every variant, in declaration order.
            pub const ALL: &'static [$name] = &[ $( $name::$variant, )+ ];

            /// The variant with libibverbs' numeric value `raw`, if there is one.
            pub const fn from_raw(raw: $raw) -> Option<Self> {
                match raw {
                    $( x if x == $value => Some($name::$variant), )+
                    _ => None,
                }
            }

            /// libibverbs' numeric value.
            pub const fn as_raw(self) -> $raw {
                self as $raw
            }

            /// The string libibverbs' `*_str` helper gives for this value.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $( $name::$variant => $text, )+
                }
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

pub(crate) use verbs_enum;
