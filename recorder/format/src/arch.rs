//! Target architectures by name, as written in the header.

/// An architecture `rec` can record on. The names are the header's `arch` strings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Arch {
    /// 64-bit x86.
    X86_64,
    /// 32-bit x86.
    X86,
    /// 64-bit ARM.
    Aarch64,
    /// 32-bit ARM (ARMv7, Thumb-2 or ARM state).
    Arm,
    /// 64-bit RISC-V.
    Riscv64,
}

impl Arch {
    /// Every architecture, in header-name order.
    pub const ALL: [Arch; 5] = [
        Arch::X86_64,
        Arch::X86,
        Arch::Aarch64,
        Arch::Arm,
        Arch::Riscv64,
    ];

    /// The architecture this code was compiled for, which is the board's when it runs in
    /// `rec`; `None` on any other. A constant, so `rec` can build its register mask at
    /// compile time.
    pub const NATIVE: Option<Arch> = if cfg!(target_arch = "x86_64") {
        Some(Arch::X86_64)
    } else if cfg!(target_arch = "x86") {
        Some(Arch::X86)
    } else if cfg!(target_arch = "aarch64") {
        Some(Arch::Aarch64)
    } else if cfg!(target_arch = "arm") {
        Some(Arch::Arm)
    } else if cfg!(target_arch = "riscv64") {
        Some(Arch::Riscv64)
    } else {
        None
    };

    /// The architecture this code was compiled for ([`Arch::NATIVE`]).
    pub fn native() -> Option<Arch> {
        Arch::NATIVE
    }

    /// The header name.
    pub fn name(self) -> &'static str {
        match self {
            Arch::X86_64 => "x86_64",
            Arch::X86 => "x86",
            Arch::Aarch64 => "aarch64",
            Arch::Arm => "arm",
            Arch::Riscv64 => "riscv64",
        }
    }

    /// Parses a header name; unknown names are an error for the caller to report, never a guess.
    pub fn from_name(name: &str) -> Option<Arch> {
        Arch::ALL.into_iter().find(|a| a.name() == name)
    }

    /// Pointer size in bytes.
    pub const fn pointer_size(self) -> u8 {
        match self {
            Arch::X86 | Arch::Arm => 4,
            Arch::X86_64 | Arch::Aarch64 | Arch::Riscv64 => 8,
        }
    }
}
