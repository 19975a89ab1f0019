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
    let o = Command::new("heaptrack")
        .arg("-o")
        .arg(out)
        .arg(program)
        .args(args)
        .output()
        .expect("heaptrack must be installed (apt-get install heaptrack)");
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

/// What to compare besides allocations, leaked bytes and leaked blocks (always compared).
#[derive(Debug, Clone, Copy)]
pub struct Strictness {
    /// Temporary allocations, in total and per site. Off when threads race: which free follows
    /// which allocation then differs between two runs.
    pub temporary: bool,
    /// The exact peak, and each site's bytes at the peak. Off when the peak's composition
    /// depends on the profiler (thread start-up blocks sized by the number of loaded modules).
    pub peak: bool,
}

/// The dynamic loader's per-thread TLS vectors (`allocate_dtv`) are sized by the number of
/// loaded modules, which includes the profiler's own preloaded libraries: their number matches
/// heaptrack's, their size cannot.
pub fn sized_by_the_profiler(module: &str) -> bool {
    basename(module).starts_with("ld-linux")
}

fn u(v: &serde_json::Value, field: &str) -> u64 {
    v[field]
        .as_u64()
        .unwrap_or_else(|| panic!("no {field} in {v}"))
}

/// The offset in `module+0xOFFSET`, the name hostside gives a frame without a symbol.
fn unsymbolized_offset(function: &str) -> Option<u64> {
    let (_, hex) = function.rsplit_once("+0x")?;
    u64::from_str_radix(hex, 16).ok()
}

/// Our site (from `report --json`'s heap section) matching a heaptrack site: same function,
/// file name, line and module. A site heaptrack could not symbolize (no symbol in a stripped
/// library) is named by its absolute address in heaptrack's run, and ours by its offset in the
/// module: they match when the module is the same and the address and offset agree within the
/// page (modules are mapped page-aligned), if exactly one of our sites does.
pub fn our_site<'a>(heap: &'a serde_json::Value, s: &HtSite) -> Option<&'a serde_json::Value> {
    let sites = heap["sites"].as_array()?;
    if let (Some(hex), None) = (s.function.strip_prefix("0x"), &s.file) {
        let addr = u64::from_str_radix(hex, 16).ok()?;
        let mut same = sites.iter().filter(|o| {
            same_module(o["module"].as_str().unwrap_or(""), &s.module)
                && o["function"]
                    .as_str()
                    .and_then(unsymbolized_offset)
                    .is_some_and(|off| off & 0xfff == addr & 0xfff)
        });
        let first = same.next();
        return first.filter(|_| same.next().is_none());
    }
    sites.iter().find(|o| {
        o["function"].as_str() == Some(s.function.as_str())
            && o["file"].as_str().map(basename) == s.file.as_deref().map(basename)
            && o["line"].as_u64().map(|l| l as u32) == s.line.filter(|&l| l != 0)
            && same_module(o["module"].as_str().unwrap_or(""), &s.module)
    })
}

/// Every difference between our heap section (`report --json --top <all>`) and heaptrack's
/// numbers for the program's own sites, heaptrack's extra sites taken out: totals exactly,
/// and per site (counts exactly, bytes as heaptrack prints them). Empty when they agree.
pub fn differences(
    heap: &serde_json::Value,
    ht: &Heaptrack,
    own: &[HtSite],
    extra: &Extra,
    strict: Strictness,
) -> Vec<String> {
    let mut diffs: Vec<String> = Vec::new();
    let mut check = |what: String, ours: String, theirs: String| {
        if ours != theirs {
            diffs.push(format!("{what}: ours {ours}, heaptrack {theirs}"));
        }
    };
    let sites = heap["sites"].as_array().cloned().unwrap_or_default();
    check(
        "allocations".into(),
        u(heap, "allocations").to_string(),
        (ht.allocations - extra.allocations).to_string(),
    );
    if strict.temporary {
        check(
            "temporary".into(),
            u(heap, "temporary").to_string(),
            (ht.temporary - extra.temporary).to_string(),
        );
    }
    if strict.peak {
        check(
            "peak bytes".into(),
            u(heap, "peak_bytes").to_string(),
            (ht.peak_bytes - extra.peak_bytes).to_string(),
        );
    }
    let our_loader_leak: u64 = sites
        .iter()
        .filter(|s| sized_by_the_profiler(s["module"].as_str().unwrap_or("")))
        .map(|s| u(s, "leaked_bytes"))
        .sum();
    let their_loader_leak: u64 = ht
        .leaked_flame
        .iter()
        .filter(|(stack, _)| stack.contains("(dl-tls.c)"))
        .map(|(_, v)| v)
        .sum();
    check(
        "leaked bytes outside the loader".into(),
        (u(heap, "leaked_bytes") - our_loader_leak).to_string(),
        (ht.leaked_bytes - their_loader_leak).to_string(),
    );
    if their_loader_leak == 0 {
        check(
            "printed leak".into(),
            ht_bytes(u(heap, "leaked_bytes")),
            ht.leaked.clone(),
        );
    }
    check(
        "leaked blocks".into(),
        (u(heap, "leaked_allocations") + u(heap, "suppressed_leaked_allocations")).to_string(),
        ht.leaked_allocations.to_string(),
    );
    for s in own {
        let Some(o) = our_site(heap, s) else {
            check(format!("site {s:?}"), "missing".into(), "present".into());
            continue;
        };
        let name = format!("{} {:?}:{:?}", s.function, s.file, s.line);
        check(
            format!("{name} allocations"),
            u(o, "allocations").to_string(),
            s.allocations.to_string(),
        );
        if strict.temporary {
            check(
                format!("{name} temporary"),
                u(o, "temporary").to_string(),
                s.temporary.to_string(),
            );
        }
        if !sized_by_the_profiler(&s.module) {
            check(
                format!("{name} leaked"),
                ht_bytes(u(o, "leaked_bytes")),
                s.leaked.clone(),
            );
            if strict.peak {
                check(
                    format!("{name} bytes at the peak"),
                    ht_bytes(u(o, "at_peak_bytes")),
                    s.peak.clone(),
                );
            }
        }
    }
    diffs
}
