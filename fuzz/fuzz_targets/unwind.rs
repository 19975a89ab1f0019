//! The unwinders of every architecture on a valid image whose unwind tables the input
//! overwrites in places, with registers inside the image's code and the rest of the input as
//! the stack copy, so that each input reaches the walk itself. Unwinding never panics or
//! loops, yields at most MAX_FRAMES + 1 addresses, starts with the sampled instruction, and
//! never shows an address outside the mapping as a frame.
#![no_main]
use std::ops::Range;
use std::sync::{Arc, OnceLock};

use crossprof_unwind::arch::{Aarch64, Arm, Riscv64, X86, X86_64};
use crossprof_unwind::{AddressSpace, Architecture, Registers, UnwindSections, MAX_FRAMES};
use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;
use object::{Object, ObjectSection};

/// One small image per architecture (fuzz/elf/build.sh), in the order of `fuzz_target!`'s match.
const IMAGES: [&[u8]; 5] = [
    include_bytes!("../elf/unwind_base.x86_64"),
    include_bytes!("../elf/unwind_base.aarch64"),
    include_bytes!("../elf/unwind_base.arm"),
    include_bytes!("../elf/unwind_base.x86"),
    include_bytes!("../elf/unwind_base.riscv64"),
];

/// Where to splice into a base image and where its code lies.
struct Layout {
    /// The file ranges of the image's unwind tables.
    tables: Vec<Range<usize>>,
    /// The addresses of its `.text`.
    text: Range<u64>,
}

fn layout(image: &[u8]) -> Layout {
    let file = object::File::parse(image).expect("the base images are valid ELF");
    let tables = [
        ".eh_frame",
        ".eh_frame_hdr",
        ".debug_frame",
        ".ARM.exidx",
        ".ARM.extab",
    ]
    .iter()
    .filter_map(|name| file.section_by_name(name)?.file_range())
    .map(|(off, len)| off as usize..(off + len) as usize)
    .filter(|r| !r.is_empty())
    .collect();
    let text = file
        .section_by_name(".text")
        .expect("the base images have code");
    Layout {
        tables,
        text: text.address()..text.address() + text.size(),
    }
}

fn layouts() -> &'static [Layout] {
    static L: OnceLock<Vec<Layout>> = OnceLock::new();
    L.get_or_init(|| IMAGES.iter().map(|i| layout(i)).collect())
}

fn run<A: Architecture>(image: &[u8], layout: &Layout, u: &mut Unstructured) -> Result<()> {
    let (tables, text) = (&layout.tables, layout.text.clone());
    let mut elf = image.to_vec();
    for _ in 0..u.int_in_range(0..=4u8)? {
        let t = &tables[u.choose_index(tables.len())?];
        let at = t.start + u.choose_index(t.len())?;
        let n = usize::from(u.int_in_range(1..=16u8)?).min(t.end - at);
        let bytes = u.bytes(n)?;
        elf[at..at + bytes.len()].copy_from_slice(bytes);
    }
    let Ok(sections) = UnwindSections::from_elf(&elf, None) else {
        return Ok(());
    };
    let sections = Arc::new(sections);
    let mut space = AddressSpace::<A>::new(false);
    space.add_module("fuzz", text.clone(), 0, &sections);
    let len = text.end - text.start;
    let sp = 0x7ff0_0000u64;
    let mut pc = text.start + u.int_in_range(0..=len - 1)?;
    if A::ARCH == crossprof_format::Arch::Arm {
        // An instruction address: the Thumb state is in the CPSR, not in the pc's low bit.
        pc &= !1;
    }
    let lr = text.start + u.int_in_range(0..=len)?;
    let fp = sp + u.int_in_range(0..=4096u64)?;
    let mut arm = [0u32; 16];
    for r in arm.iter_mut() {
        *r = u.arbitrary()?;
    }
    (arm[7], arm[11], arm[13], arm[14], arm[15]) =
        (fp as u32, fp as u32, sp as u32, lr as u32, pc as u32);
    let regs = Registers {
        pc,
        sp,
        fp,
        lr,
        arm,
    };
    let stack = u.bytes(u.len())?;
    let mut out = Vec::new();
    space.unwind(regs, stack, &mut out);
    assert!(out.len() <= MAX_FRAMES + 1, "{} frames", out.len());
    if let Some(&first) = out.first() {
        assert_eq!(first, pc, "{out:x?}");
    }
    for &ra in out.iter().skip(1) {
        assert!(
            ra > text.start && ra <= text.end,
            "{ra:#x} outside {text:x?}: {out:x?}"
        );
    }
    Ok(())
}

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let Ok(which) = u.choose_index(IMAGES.len()) else {
        return;
    };
    let (image, layout) = (IMAGES[which], &layouts()[which]);
    let _ = match which {
        0 => run::<X86_64>(image, layout, &mut u),
        1 => run::<Aarch64>(image, layout, &mut u),
        2 => run::<Arm>(image, layout, &mut u),
        3 => run::<X86>(image, layout, &mut u),
        _ => run::<Riscv64>(image, layout, &mut u),
    };
});
