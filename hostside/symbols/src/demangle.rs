//! Readable function names from linkage names: Rust (legacy and v0, without the hash suffix) and
//! Itanium C++ (with parameter types, as `work::Engine::hot_a(long)`). Anything else, C names
//! included, is returned as it is.

/// Names longer than this are shown mangled: demangling cost and output grow with the input,
/// and no real symbol comes close.
const MAX_MANGLED_LEN: usize = 16 * 1024;

/// Demangles `name` if it is a Rust or C++ linkage name. Allocates; call once per distinct name.
pub fn demangle(name: &str) -> String {
    if name.len() > MAX_MANGLED_LEN {
        return name.to_string();
    }
    // A PLT stub's made-up name (see `crate::plt`): the function's name, demangled, then
    // the suffix, as objdump shows `operator new(unsigned long)@plt`.
    if let Some(function) = name.strip_suffix("@plt") {
        return format!("{}@plt", demangle(function));
    }
    if let Some(rust) = rust(name) {
        return rust;
    }
    if name.starts_with("_Z") {
        if let Ok(sym) = cpp_demangle::Symbol::new(name) {
            if let Ok(text) = sym.demangle(&cpp_demangle::DemangleOptions::default()) {
                return text;
            }
        }
    }
    name.to_string()
}

/// Rust v0 names (`_R…`) and legacy names (`_ZN…17h<16 hex>E`, told apart from C++ by the hash).
fn rust(name: &str) -> Option<String> {
    let d = rustc_demangle::try_demangle(name).ok()?;
    let full = d.to_string();
    let without_hash = format!("{d:#}");
    let is_v0 = name.starts_with("_R") || name.starts_with("R") || name.starts_with("__R");
    (is_v0 || full != without_hash).then_some(without_hash)
}

#[cfg(test)]
mod tests {
    use super::demangle;

    #[test]
    fn cpp_with_parameters() {
        assert_eq!(
            demangle("_ZN4work6Engine5hot_aEl"),
            "work::Engine::hot_a(long)"
        );
        assert_eq!(
            demangle("_ZN4workL3mixEml"),
            "work::mix(unsigned long, long)"
        );
    }

    #[test]
    fn plt_stubs_keep_their_suffix() {
        assert_eq!(demangle("_Znwm@plt"), "operator new(unsigned long)@plt");
        assert_eq!(demangle("realloc@plt"), "realloc@plt");
    }

    #[test]
    fn rust_without_hash() {
        assert_eq!(
            demangle("_ZN9cpu_split5hot_a17h0123456789abcdefE"),
            "cpu_split::hot_a"
        );
        assert_eq!(demangle("_RNvCs1234_9cpu_split5hot_a"), "cpu_split::hot_a");
    }

    #[test]
    fn c_and_garbage_unchanged() {
        assert_eq!(demangle("hot_a"), "hot_a");
        assert_eq!(demangle("main"), "main");
        assert_eq!(demangle("_Z"), "_Z");
        assert_eq!(demangle("_ZN"), "_ZN");
        let long = format!("_ZN{}E", "3foo".repeat(10_000));
        assert_eq!(demangle(&long), long);
    }
}
