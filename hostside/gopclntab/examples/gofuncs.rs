//! Prints the Go functions at the addresses given: `gofuncs BINARY ADDR...` (hex). A
//! debugging aid for the table reader.
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((path, addrs)) = args.split_first() else {
        eprintln!("usage: gofuncs BINARY [HEXADDR...]");
        return ExitCode::from(2);
    };
    let data = match std::fs::read(path) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("gofuncs: {path}: {e}");
            return ExitCode::from(2);
        }
    };
    let Ok(file) = object::File::parse(&*data) else {
        eprintln!("gofuncs: {path}: not ELF");
        return ExitCode::from(2);
    };
    let Some(at) = crossprof_gopclntab::locate(&file, &data) else {
        eprintln!("gofuncs: {path}: no Go function table");
        return ExitCode::from(1);
    };
    let table = match crossprof_gopclntab::GoTable::new(&data[at.file_range.clone()], at.text_start)
    {
        Ok(t) => t,
        Err(e) => {
            eprintln!("gofuncs: {path}: {e}");
            return ExitCode::from(1);
        }
    };
    println!(
        "{:?}, {} functions, range {:x?}",
        table.version(),
        table.len(),
        table.range()
    );
    for a in addrs {
        let Ok(pc) = u64::from_str_radix(a.trim_start_matches("0x"), 16) else {
            continue;
        };
        match table.func_at(pc) {
            Some(f) => println!(
                "{pc:#x} {} [{:#x}..{:#x}) sp_delta {:?} {:?} top {} switch {}",
                f.name().unwrap_or("?"),
                f.entry,
                f.end,
                f.sp_delta(pc),
                f.file_line(pc),
                f.is_top_frame(),
                f.switches_stacks()
            ),
            None => println!("{pc:#x} -"),
        }
    }
    ExitCode::SUCCESS
}
