//! heaptrack 1.4 as the reference for the heap suites: runs a program under `heaptrack`, reads
//! the data with `heaptrack_print`, and returns its numbers *exactly*.
//!
//! `heaptrack_print` rounds the sizes it prints ("27.65M"); the exact values come from its flame
//! graph files, which list every allocation trace with an integer cost: the `leaked` graph sums
//! to "total memory leaked" and the `peak` graph (each trace's live bytes at the moment of the
//! global peak) to "peak heap memory consumption".
//!
//! heaptrack also records allocations that the program never makes: its preload library links
//! libstdc++, whose initializer allocates the C++ exception emergency pool (72,704 bytes with
//! GCC 12) before `main` of every program heaptrack runs, C programs included. That block is one
//! more allocation and, live from start-up until heaptrack frees it at exit, 72,704 more bytes
//! of peak. [`Heaptrack::split`] separates such sites (in modules the program itself does not
//! load) so that the program's own numbers can be compared exactly.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A site as `heaptrack_print` lists it (templates not shortened).
#[derive(Debug, Default, Clone)]
pub struct HtSite {
    /// Function, or `0x<address>` when heaptrack could not name it.
    pub function: String,
    /// Source file, when known.
    pub file: Option<String>,
    /// Source line, when known.
    pub line: Option<u32>,
    /// Module path.
    pub module: String,
    /// Calls to allocation functions.
    pub allocations: u64,
    /// Temporary allocations.
    pub temporary: u64,
    /// Live bytes at the global peak as heaptrack prints them ("72.70K").
    pub peak: String,
    /// Leaked bytes as heaptrack prints them ("2.00M", "0B").
    pub leaked: String,
}

impl HtSite {
    /// How the site's own frame ends a line of heaptrack's flame graphs.
    fn flame_label(&self) -> String {
        match &self.file {
            Some(f) if !self.function.starts_with("0x") => {
                format!("{} ({})", self.function, basename(f))
            }
            _ => self.function.clone(),
        }
    }
}

/// What heaptrack says about one run.
#[derive(Debug, Default)]
pub struct Heaptrack {
    /// "calls to allocation functions".
    pub allocations: u64,
    /// "temporary memory allocations".
    pub temporary: u64,
    /// "peak heap memory consumption" as printed.
    pub peak: String,
    /// "total memory leaked" as printed.
    pub leaked: String,
    /// Exact peak: the sum of the `peak` flame graph.
    pub peak_bytes: u64,
    /// Exact leaked bytes: the sum of the `leaked` flame graph.
    pub leaked_bytes: u64,
    /// `heaptrack`'s record-time stats: blocks never freed (suppressed leaks included).
    pub leaked_allocations: u64,
    /// Every site of the allocations list.
    pub sites: Vec<HtSite>,
    /// `stack value` lines of the leaked flame graph.
    pub leaked_flame: Vec<(String, u64)>,
    /// `stack value` lines of the peak flame graph.
    pub peak_flame: Vec<(String, u64)>,
}

/// What heaptrack counted at sites in modules the program does not load (its own libraries).
#[derive(Debug, Default)]
pub struct Extra {
    /// Those sites.
    pub sites: Vec<HtSite>,
    /// Their allocations.
    pub allocations: u64,
    /// Their temporary allocations.
    pub temporary: u64,
    /// Their live bytes at heaptrack's peak (exact, from the peak flame graph).
    pub peak_bytes: u64,
}

/// The base name of a path.
pub fn basename(p: &str) -> &str {
    p.rsplit('/').next().unwrap_or(p)
}

/// `libstdc++.so.6.0.30` and `libstdc++.so.6` name the same library.
pub fn same_module(a: &str, b: &str) -> bool {
    let stem = |m: &str| basename(m).split(".so").next().unwrap_or("").to_string();
    stem(a) == stem(b)
}

/// heaptrack_print 1.4's byte format: integers below 1000, else two decimals and the first
/// letter of the (power of 1000) unit.
pub fn ht_bytes(n: u64) -> String {
    if n < 1000 {
        return format!("{n}B");
    }
    let mut v = n as f64;
    let mut unit = 0;
    while v.abs() > 1000.0 && unit < 4 {
        v /= 1000.0;
        unit += 1;
    }
    format!("{v:.2}{}", ["B", "K", "M", "G", "T"][unit])
}

fn number_after(text: &str, key: &str) -> u64 {
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with(key))
        .unwrap_or_else(|| panic!("no {key:?} in:\n{text}"));
    line.trim_start()[key.len()..]
        .split_whitespace()
        .next()
        .and_then(|w| w.parse().ok())
        .unwrap_or_else(|| panic!("no number in {line:?}"))
}

fn text_after(text: &str, key: &str) -> String {
    text.lines()
        .find_map(|l| l.strip_prefix(key))
        .unwrap_or_else(|| panic!("no {key:?} in:\n{text}"))
        .trim()
        .to_string()
}

/// `heaptrack_print` on `data` with `args`; its standard output.
fn print(data: &Path, args: &[&str]) -> String {
    let o = Command::new("heaptrack_print")
        .arg("--file")
        .arg(data)
        .args(args)
        .output()
        .expect("run heaptrack_print");
    let text = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(o.status.success(), "heaptrack_print failed:\n{text}");
    text
}

fn flame(data: &Path, cost: &str, out: &Path) -> Vec<(String, u64)> {
    print(
        data,
        &[
            "--print-allocators=0",
            "--print-peaks=0",
            "--print-leaks=0",
            "--print-temporary=0",
            &format!("--flamegraph-cost-type={cost}"),
            "--print-flamegraph",
            out.to_str().expect("utf-8 path"),
        ],
    );
    std::fs::read_to_string(out)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let (stack, v) = l.rsplit_once(' ')?;
            Some((stack.to_string(), v.parse().ok()?))
        })
        .collect()
}

/// Runs `program args` under heaptrack, writing `<out>.zst`, and reads the result.
pub fn heaptrack(program: &Path, args: &[&str], out: &Path) -> Heaptrack {
    heaptrack_in(None, program, args, out)
}

/// [`heaptrack`] with `cwd` as the program's working directory.
pub fn heaptrack_in(cwd: Option<&Path>, program: &Path, args: &[&str], out: &Path) -> Heaptrack {
    let mut cmd = Command::new("heaptrack");
    cmd.arg("-o").arg(out).arg(program).args(args);
    if let Some(d) = cwd {
        cmd.current_dir(d);
    }
    let o = cmd
        .output()
        .expect("heaptrack must be installed: run scripts/test-setup.sh");
    // The "heaptrack stats" block goes to standard error.
    let stdout = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(o.status.success(), "heaptrack failed:\n{stdout}");
    let data = ["zst", "gz"]
        .iter()
        .map(|e| PathBuf::from(format!("{}.{e}", out.display())))
        .find(|p| p.exists())
        .unwrap_or_else(|| panic!("no heaptrack data for {}:\n{stdout}", out.display()));
    let text = print(
        &data,
        &[
            "--shorten-templates=0",
            "--peak-limit=1000000",
            "--sub-peak-limit=0",
            "--print-allocators=1",
            "--print-peaks=0",
            "--print-leaks=1",
            "--print-temporary=1",
        ],
    );
    let leaked_flame = flame(
        &data,
        "leaked",
        &PathBuf::from(format!("{}.leaked.txt", out.display())),
    );
    let peak_flame = flame(
        &data,
        "peak",
        &PathBuf::from(format!("{}.peak.txt", out.display())),
    );
    Heaptrack {
        allocations: number_after(&text, "calls to allocation functions:"),
        temporary: number_after(&text, "temporary memory allocations:"),
        peak: text_after(&text, "peak heap memory consumption:"),
        leaked: text_after(&text, "total memory leaked:"),
        peak_bytes: peak_flame.iter().map(|(_, v)| v).sum(),
        leaked_bytes: leaked_flame.iter().map(|(_, v)| v).sum(),
        leaked_allocations: number_after(&stdout, "leaked allocations:"),
        sites: parse_sites(&text),
        leaked_flame,
        peak_flame,
    }
}

/// The sites of heaptrack_print's allocations, temporary and leaks lists, merged by location.
fn parse_sites(text: &str) -> Vec<HtSite> {
    let mut sites: BTreeMap<(String, Option<String>, Option<u32>, String), HtSite> =
        BTreeMap::new();
    let lines: Vec<&str> = text.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        let l = lines[i];
        let words: Vec<&str> = l.split_whitespace().collect();
        let entry = if !l.starts_with(' ') && l.ends_with(" from") {
            if l.contains(" calls to allocation functions with ") {
                // "N calls to allocation functions with 72.70K peak consumption from"
                Some(("allocations", words[0].to_string(), words.get(6).copied()))
            } else if l.contains(" temporary allocations of ") {
                Some(("temporary", words[0].to_string(), None))
            } else if l.contains(" leaked over ") {
                Some(("leaked", words[0].to_string(), None))
            } else {
                None
            }
        } else {
            None
        };
        i += 1;
        let Some((what, value, peak)) = entry else {
            continue;
        };
        let function = lines.get(i).copied().unwrap_or("").to_string();
        i += 1;
        let (mut file, mut line, mut module) = (None, None, String::new());
        while let Some(l) = lines.get(i) {
            if let Some(at) = l.strip_prefix("  at ") {
                let (f, n) = at.rsplit_once(':').unwrap_or((at, "0"));
                file = Some(f.to_string());
                line = n.parse().ok();
                i += 1;
            } else if let Some(m) = l.strip_prefix("  in ") {
                module = m.to_string();
                i += 1;
                break;
            } else {
                break;
            }
        }
        let key = (function.clone(), file.clone(), line, module.clone());
        let s = sites.entry(key).or_insert_with(|| HtSite {
            function,
            file,
            line,
            module,
            leaked: "0B".into(),
            ..HtSite::default()
        });
        match what {
            "allocations" => {
                s.allocations = value.parse().expect("count");
                s.peak = peak.unwrap_or("").to_string();
            }
            "temporary" => s.temporary = value.parse().expect("count"),
            _ => s.leaked = value,
        }
    }
    sites.into_values().collect()
}

/// The innermost frame of a flame graph line's stack.
fn leaf(stack: &str) -> &str {
    stack.trim_end_matches(';').rsplit(';').next().unwrap_or("")
}

/// Basenames of `program` and of every library it loads here (by `ldd`).
pub fn loaded_modules(program: &Path) -> Vec<String> {
    let out = Command::new("ldd").arg(program).output().expect("run ldd");
    let mut v = vec![basename(program.to_str().expect("utf-8 path")).to_string()];
    for w in String::from_utf8_lossy(&out.stdout).split_whitespace() {
        if w.starts_with('/') {
            v.push(basename(w).to_string());
        }
    }
    v
}

impl Heaptrack {
    /// Splits the sites into the program's own (in `loaded` modules) and heaptrack's extra ones,
    /// with the extra sites' exact share of the totals. Panics when an extra site cannot be
    /// found in the peak flame graph (its share of the peak would be unknown) or leaked (its
    /// leaked blocks could not be counted exactly).
    pub fn split(&self, loaded: &[String]) -> (Vec<HtSite>, Extra) {
        let (own, extra): (Vec<HtSite>, Vec<HtSite>) = self
            .sites
            .iter()
            .cloned()
            .partition(|s| loaded.iter().any(|m| same_module(m, &s.module)));
        let mut e = Extra::default();
        let mut labels = std::collections::BTreeSet::new();
        for s in &extra {
            assert_eq!(s.leaked, "0B", "heaptrack's own site {s:?} leaked");
            let label = s.flame_label();
            assert!(
                self.peak_flame
                    .iter()
                    .any(|(stack, _)| leaf(stack) == label),
                "heaptrack's own site {s:?} ({label:?}) is not in its peak flame graph"
            );
            labels.insert(label);
            e.allocations += s.allocations;
            e.temporary += s.temporary;
        }
        e.peak_bytes = self
            .peak_flame
            .iter()
            .filter(|(stack, _)| labels.contains(leaf(stack)))
            .map(|(_, v)| v)
            .sum();
        e.sites = extra;
        (own, e)
    }
}
