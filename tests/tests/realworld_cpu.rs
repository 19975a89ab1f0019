//! Full stacks on real programs (issue 11): every program of the real-world corpus
//! (`tests/realworld/`: sqlite3, lua, zstd, ninja from Debian sources, ripgrep from
//! crates.io), linked by GNU ld, lld and mold (ripgrep: Rust's default linker), recorded on
//! x86_64 with `rec` at its defaults beside `perf record --call-graph dwarf` in the same run,
//! compared as `crossprof_tests::perf_compare` describes.

use crossprof_tests::{perf_compare, realworld};

macro_rules! cases {
    ($($name:ident: $program:literal $variant:literal;)*) => {
        $(
            #[test]
            fn $name() {
                perf_compare::check(&realworld::build($program, $variant));
            }
        )*
    };
}

cases! {
    sqlite3_gnu_ld: "sqlite3" "bfd-O2-pie";
    sqlite3_lld: "sqlite3" "lld-O2-pie";
    sqlite3_mold: "sqlite3" "mold-O2-pie";
    sqlite3_gnu_ld_os_no_pie: "sqlite3" "bfd-Os-nopie";
    lua_gnu_ld: "lua" "bfd-O2-pie";
    lua_lld: "lua" "lld-O2-pie";
    lua_mold: "lua" "mold-O2-pie";
    lua_lld_os_no_pie: "lua" "lld-Os-nopie";
    zstd_gnu_ld: "zstd" "bfd-O2-pie";
    zstd_lld: "zstd" "lld-O2-pie";
    zstd_mold: "zstd" "mold-O2-pie";
    ninja_gnu_ld: "ninja" "bfd-O2-pie";
    ninja_lld: "ninja" "lld-O2-pie";
    ninja_mold: "ninja" "mold-O2-pie";
    ninja_mold_os_no_pie: "ninja" "mold-Os-nopie";
    ripgrep_rust_default_linker: "ripgrep" "rust";
}
