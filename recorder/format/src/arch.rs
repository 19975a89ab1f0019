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
    /// The architecture this code was compiled for, which is the board's when it runs in `rec`.
    pub fn native() -> Option<Arch> {
        match std::env::consts::ARCH {
            "x86_64" => Some(Arch::X86_64),
            "x86" => Some(Arch::X86),
            "aarch64" => Some(Arch::Aarch64),
            "arm" => Some(Arch::Arm),
            "riscv64" => Some(Arch::Riscv64),
            _ => None,
        }
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
        [
            Arch::X86_64,
            Arch::X86,
            Arch::Aarch64,
            Arch::Arm,
            Arch::Riscv64,
        ]
        .into_iter()
        .find(|a| a.name() == name)
    }

    /// Pointer size in bytes.
    pub fn pointer_size(self) -> u8 {
        match self {
            Arch::X86 | Arch::Arm => 4,
            _ => 8,
        }
    }
}
