#!/usr/bin/env python3
"""Buildroot coding-style checks for the BR2_EXTERNAL tree in buildroot-pkg/.

Buildroot's own `utils/check-package` is not packaged anywhere our CI can install it from, so
this file checks the rules that its manual ("Adding new packages", "Coding style") states and
that apply to our package, written from the manual:

- every file: no trailing whitespace, a newline at the end, no blank last line, no two blank
  lines in a row, ASCII only;
- Config.in*: options and their attributes indented with one tab, entries (config, comment,
  if, menu, source...) not indented, help text as <tab><2 spaces> and at most 62 characters
  (72 columns with a tab of 8), the first help line not starting with a space, attributes in
  the order type, default, depends on, select, help, no redundant `default n`, symbols named
  BR2_PACKAGE_<PKG>... / BR2_PACKAGE_HOST_<PKG>...;
- <pkg>.mk: the 80-hash header block naming the package, every variable prefixed with the
  package name (HOST_ allowed), tabs inside define/endef and on continuation lines and nowhere
  else, one space before a backslash, no backslash before a blank line, `ifeq ($(SYM),y)`
  instead of ifdef/ifndef, `$(VAR)` not `${VAR}`, nothing installed to $(HOST_DIR)/usr, no
  variable set to its default value, no unconditional override of a variable;
- <pkg>.hash: `<type>  <hex>  <file>` with two spaces, a known type and a digest of its length;
  every file listed in <PKG>_LICENSE_FILES is hashed, and (our addition) the digest matches
  the file at the repository root;
- external.desc: `name:` made of [A-Za-z0-9_], a `desc:` line; Config.in sources exist;
- *.fragment (kernel configuration fragments for BR2_LINUX_KERNEL_CONFIG_FRAGMENT_FILES):
  check-package has no rules for them (utils/check-package hands a fragment to no checker),
  so only the every-file rules above plus ours: each line is `CONFIG_<SYM>=<value>`,
  `# CONFIG_<SYM> is not set`, a `#` comment or blank, as the kernel's merge_config.sh reads
  them, and no symbol is set twice (merge_config.sh would warn of the redefinition).

Usage: br_style.py [TREE]          check TREE (default: buildroot-pkg/ of this repository)
       br_style.py --self-test     break a copy on purpose and require every rule to fire
"""
import hashlib
import pathlib
import re
import shutil
import sys
import tempfile

REPO = pathlib.Path(__file__).resolve().parents[2]
MANUAL = "Buildroot manual"

CONFIG_ENTRIES = {"choice", "comment", "config", "endchoice", "endif", "endmenu", "if",
                  "menu", "menuconfig", "source"}
CONFIG_ATTRIBUTES = {"bool", "default", "depends", "help", "prompt", "select", "string"}
ATTRIBUTE_ORDER = {"bool": 1, "prompt": 1, "string": 1, "default": 2, "depends": 3,
                   "select": 4, "help": 5}
# Variables of Buildroot's own that a package .mk may set without its prefix.
MK_ALLOWED_FOREIGN = {"BR_NO_CHECK_HASH_FOR", "TARGET_FINALIZE_HOOKS"}
USELESS_DEFAULTS = re.compile(r"_(INSTALL_TARGET\s*=\s*YES|INSTALL_STAGING\s*=\s*NO|"
                              r"INSTALL_IMAGES\s*=\s*NO|REDISTRIBUTE\s*=\s*YES)\s*$")
HASH_LEN = {"md5": 32, "sha1": 40, "sha224": 56, "sha256": 64, "sha384": 96, "sha512": 128}


class Report:
    def __init__(self):
        self.findings = []

    def add(self, path, lineno, rule, msg):
        self.findings.append((str(path), lineno, rule, msg))


def generic(path, lines, rep, raw):
    if raw and not raw.endswith("\n"):
        rep.add(path, len(lines), "newline-at-eof", "missing newline at end of file")
    if lines and lines[-1].strip() == "":
        rep.add(path, len(lines), "empty-last-line", "empty line at end of file")
    prev_blank = False
    for n, line in enumerate(lines, 1):
        if line != line.rstrip():
            rep.add(path, n, "trailing-space", "line contains trailing whitespace")
        if any(ord(c) > 127 for c in line):
            rep.add(path, n, "ascii", "line contains non-ASCII characters")
        blank = line.strip() == ""
        if blank and prev_blank:
            rep.add(path, n, "consecutive-empty-lines", "consecutive empty lines")
        prev_blank = blank


def check_config(path, lines, rep, pkg_upper):
    in_help = False
    first_help = False
    order = 0
    continuation = False
    for n, line in enumerate(lines, 1):
        stripped = line.strip()
        if continuation:
            continuation = stripped.endswith("\\")
            if not line.startswith("\t"):
                rep.add(path, n, "config-indent", "continuation line should be indented with tabs")
            continue
        if stripped == "" or stripped.startswith("#"):
            continue
        word = stripped.split()[0]
        if in_help and word not in CONFIG_ENTRIES:
            limit = r"^\t  \S.{0,61}$" if first_help else r"^\t  .{0,62}$"
            first_help = False
            if not re.match(limit, line) and not re.match(r"^\t  (https?|git)://\S*$", line):
                rep.add(path, n, "help-text",
                        "help text: <tab><2 spaces><at most 62 characters>")
            continue
        in_help = False
        continuation = stripped.endswith("\\")
        if word in CONFIG_ENTRIES:
            order = 0
            if line != line.lstrip():
                rep.add(path, n, "config-indent", f"'{word}' should not be indented")
            if word in ("config", "menuconfig"):
                sym = stripped.split()[1] if len(stripped.split()) > 1 else ""
                if not re.match(rf"^BR2_PACKAGE_(HOST_)?{pkg_upper}(_[A-Z0-9_]+)?$", sym):
                    rep.add(path, n, "config-symbol",
                            f"{sym}: expected BR2_PACKAGE_{pkg_upper}... or "
                            f"BR2_PACKAGE_HOST_{pkg_upper}...")
            if word == "source":
                check_source(path, n, stripped, rep)
            continue
        if word in CONFIG_ATTRIBUTES:
            if not line.startswith("\t" + word):
                rep.add(path, n, "config-indent", f"'{word}' should be indented with one tab")
            rank = ATTRIBUTE_ORDER.get(word, 0)
            if rank < order:
                rep.add(path, n, "attributes-order",
                        "attributes order: type, default, depends on, select, help")
            order = max(order, rank)
            if re.match(r"^\tdefault n\s*(#.*)?$", line):
                rep.add(path, n, "default-n", "'default n' is the default and is redundant")
            if word == "help":
                in_help, first_help = True, True


def check_source(path, lineno, stripped, rep):
    m = re.match(r'^source\s+"\$BR2_EXTERNAL_([A-Za-z0-9_]+)_PATH/(.+)"$', stripped)
    if not m:
        rep.add(path, lineno, "config-source",
                'source "$BR2_EXTERNAL_<NAME>_PATH/..." expected in an external tree')
        return
    if not (path.parent / m.group(2)).is_file() and not (TREE_ROOT / m.group(2)).is_file():
        rep.add(path, lineno, "config-source", f"{m.group(2)} does not exist")


def check_mk(path, lines, rep, pkg, pkg_upper):
    header = ["#" * 80, "#", f"# {pkg}", "#", "#" * 80, ""]
    for i, want in enumerate(header):
        got = lines[i] if i < len(lines) else None
        if got is None or got.rstrip() != want:
            rep.add(path, i + 1, "mk-header", f"header line {i + 1} should be {want!r}")
    in_define = False
    backslash = False
    target_rule = False
    unconditional = set()
    depth = 0
    for n, line in enumerate(lines, 1):
        stripped = line.strip()
        cont = backslash
        if re.match(r"^\s*define\s", line):
            in_define = True
        elif re.match(r"^\s*endef\b", line):
            in_define = False
        else:
            expect_tab = in_define or cont or target_rule
            if not cont and re.match(r"^\s*(ifeq|ifneq|ifdef|ifndef|else|endif)\b", line):
                expect_tab = False
            if re.match(r"^[^#\s][^=]*:\s", line) and "=" not in line.split(":")[0]:
                target_rule = True
            elif stripped == "":
                target_rule = False
            elif in_define and stripped.startswith("#"):
                pass
            elif expect_tab and not line.startswith("\t"):
                rep.add(path, n, "mk-indent", "expected indent with tabs")
            elif not expect_tab and line.startswith("\t"):
                rep.add(path, n, "mk-indent", "unexpected indent with tabs")
        backslash = bool(re.match(r"^[^#].*\\$", line))
        if cont and stripped == "":
            rep.add(path, n - 1, "trailing-backslash", "backslash before a blank line")
        if re.match(r"^.*(  |\t ?)\\$", line.rstrip()):
            rep.add(path, n, "space-before-backslash", "use one space before a backslash")
        if re.match(r"^\s*(else\s+)?(ifdef|ifndef)\s", line):
            rep.add(path, n, "ifdef", "use ifeq ($(SYMBOL),y) / ifneq, not ifdef / ifndef")
        if re.match(r"^[^#].*[^$]\$\{\w+\}", line):
            rep.add(path, n, "variable-braces", "use $() to delimit variables, not ${}")
        if re.match(r"^[^#].*\$\(HOST_DIR\)/usr", line):
            rep.add(path, n, "host-dir-usr", "install to $(HOST_DIR)/, not $(HOST_DIR)/usr/")
        if not cont and not line.startswith("\t") and USELESS_DEFAULTS.search(line) and depth == 0:
            rep.add(path, n, "useless-default", "variable set to its default value")
        # Buildroot's check-package skips a rule when the line before names it in a
        # "# check-package disable" comment; this rule is the one our package needs that for.
        if re.match(rf"^{pkg_upper}_SOURCE\s*=\s*{re.escape(pkg)}-\$\({pkg_upper}_VERSION\)\.tar\.gz",
                    line) and not re.match(r"^\s*# check-package .*\bRemoveDefaultPackageSourceVariable\b",
                                           lines[n - 2] if n >= 2 else ""):
            rep.add(path, n, "default-source", "remove the default value of _SOURCE")
        if re.match(r"^\s*(ifeq|ifneq|ifdef|ifndef)\b", line):
            depth += 1
        elif re.match(r"^\s*endif\b", line):
            depth -= 1
        if cont or line.startswith("\t"):
            continue
        m = re.match(r"^(define\s+)?([A-Za-z0-9_]+)\s*(\+=|:=|\?=|=)?", line)
        if m and (m.group(1) or m.group(3)) and re.match(r"^[A-Z0-9_]+_[A-Z0-9_]+$", m.group(2)):
            var = m.group(2)
            if not re.match(rf"^(HOST_)?{pkg_upper}_", var) and var not in MK_ALLOWED_FOREIGN:
                rep.add(path, n, "variable-prefix",
                        f"variable {var} is not prefixed with {pkg_upper}_ or HOST_{pkg_upper}_")
            if m.group(3) in ("=", ":=") and depth == 0:
                if var in unconditional:
                    rep.add(path, n, "overridden-variable", f"unconditional override of {var}")
                unconditional.add(var)


def check_hash(path, lines, rep, license_files):
    hashed = {}
    for n, line in enumerate(lines, 1):
        if line.strip() == "" or line.startswith("#"):
            continue
        fields = line.split()
        if len(fields) != 3:
            rep.add(path, n, "hash-fields", "expected three fields: <type>  <hex>  <file>")
            continue
        htype, digest, name = fields
        if htype not in HASH_LEN:
            rep.add(path, n, "hash-type", f"unknown hash type {htype}")
        elif not re.match(rf"^[0-9a-fA-F]{{{HASH_LEN[htype]}}}$", digest):
            rep.add(path, n, "hash-length", f"{htype} wants {HASH_LEN[htype]} hex digits")
        if line != f"{htype}  {digest}  {name}":
            rep.add(path, n, "hash-spaces", "fields must be separated by exactly two spaces")
        hashed[name] = (htype, digest, n)
    for name in license_files:
        if name not in hashed:
            rep.add(path, 0, "hash-license", f"license file {name} has no hash")
            continue
        htype, digest, n = hashed[name]
        src = REPO / name
        if htype in HASH_LEN and src.is_file():
            if hashlib.new(htype, src.read_bytes()).hexdigest() != digest.lower():
                rep.add(path, n, "hash-license", f"{name}: digest does not match the file")


FRAGMENT_LINE = re.compile(r'^(CONFIG_[A-Za-z0-9_]+=(y|m|n|-?[0-9]+|0x[0-9a-fA-F]+|"[^"]*")'
                           r'|# CONFIG_[A-Za-z0-9_]+ is not set|#.*|)$')


def check_fragment(path, lines, rep):
    seen = {}
    for n, line in enumerate(lines, 1):
        if not FRAGMENT_LINE.match(line):
            rep.add(path, n, "fragment-line",
                    "expected CONFIG_<SYM>=<value>, '# CONFIG_<SYM> is not set' or a comment")
            continue
        m = re.match(r"^(?:# )?(CONFIG_[A-Za-z0-9_]+)(=| is not set)", line)
        if m:
            if m.group(1) in seen:
                rep.add(path, n, "fragment-redefined",
                        f"{m.group(1)} already set on line {seen[m.group(1)]}")
            seen[m.group(1)] = n


def check_external_desc(path, lines, rep):
    names = [l for l in lines if l.startswith("name:")]
    if len(names) != 1 or not re.match(r"^name: [A-Za-z0-9_]+$", names[0]):
        rep.add(path, 1, "external-desc", "one 'name: <[A-Za-z0-9_]+>' line expected")
    if not any(l.startswith("desc: ") for l in lines):
        rep.add(path, 1, "external-desc", "a 'desc: ...' line expected")


TREE_ROOT = REPO / "buildroot-pkg"


def check_tree(tree):
    global TREE_ROOT
    TREE_ROOT = tree
    rep = Report()
    files = sorted(p for p in tree.rglob("*") if p.is_file() and p.name != "README.md")
    for name in ("external.desc", "external.mk", "Config.in"):
        if not (tree / name).is_file():
            rep.add(tree / name, 0, "external-tree", "missing")
    for path in files:
        raw = path.read_text(encoding="utf-8", errors="replace")
        lines = raw.split("\n")
        if raw.endswith("\n"):
            lines = lines[:-1]
        generic(path, lines, rep, raw)
        pkgdir = path.parent
        pkg = pkgdir.name
        pkg_upper = pkg.replace("-", "_").upper()
        if path.name == "external.desc":
            check_external_desc(path, lines, rep)
        elif path.suffix == ".fragment":
            check_fragment(path, lines, rep)
        elif path.name.startswith("Config.in"):
            if path.parent == tree:
                for n, line in enumerate(lines, 1):
                    if line.startswith("source"):
                        check_source(path, n, line.strip(), rep)
            else:
                check_config(path, lines, rep, pkg_upper)
        elif path.suffix == ".mk" and path.parent != tree:
            if path.stem != pkg:
                rep.add(path, 0, "mk-name", f"should be named {pkg}.mk")
            check_mk(path, lines, rep, pkg, pkg_upper)
        elif path.suffix == ".hash":
            mk = pkgdir / f"{pkg}.mk"
            lic = []
            if mk.is_file():
                m = re.search(rf"^{pkg_upper}_LICENSE_FILES\s*=\s*(.*)$", mk.read_text(), re.M)
                lic = m.group(1).split() if m else []
            check_hash(path, lines, rep, lic)
    return rep.findings


def print_findings(findings, base):
    for path, lineno, rule, msg in findings:
        try:
            shown = pathlib.Path(path).relative_to(base)
        except ValueError:
            shown = path
        print(f"{shown}:{lineno}: [{rule}] {msg}")


# Each defect names the rule that must report it; --self-test applies all of them to a copy.
DEFECTS = [
    ("package/crossprof/Config.in", "\tbool \"crossprof\"", "    bool \"crossprof\"",
     "config-indent"),
    ("package/crossprof/Config.in", "\tdepends on BR2_PACKAGE_HOST_RUSTC_TARGET_ARCH_SUPPORTS",
     "\tselect BR2_PACKAGE_HOST_RUSTC\n\tdepends on BR2_PACKAGE_HOST_RUSTC_TARGET_ARCH_SUPPORTS",
     "attributes-order"),
    ("package/crossprof/Config.in", "\t  crossprof records", "\t crossprof records", "help-text"),
    ("package/crossprof/Config.in", "\t  This installs",
     "\t  This installs a very long line that goes well past the seventy-two columns",
     "help-text"),
    ("package/crossprof/Config.in", "\tdefault y", "\tdefault n", "default-n"),
    ("package/crossprof/Config.in", "config BR2_PACKAGE_CROSSPROF_HEAP",
     "config BR2_PACKAGE_CROSPROF_HEAP", "config-symbol"),
    ("package/crossprof/Config.in.host", "(hostside)\"", "(hostside)\"   ", "trailing-space"),
    ("package/crossprof/crossprof.mk", "#" * 80 + "\n#\n# crossprof",
     "#" * 79 + "\n#\n# crossprof", "mk-header"),
    ("package/crossprof/crossprof.mk", "CROSSPROF_LICENSE = ", "CROSSPORF_LICENSE = ",
     "variable-prefix"),
    ("package/crossprof/crossprof.mk", "$(INSTALL) -D -m 0755 $(CROSSPROF_BIN_DIR)/rec $(TARGET_DIR)",
     "$(INSTALL) -D -m 0755 ${CROSSPROF_BIN_DIR}/rec $(TARGET_DIR)", "variable-braces"),
    ("package/crossprof/crossprof.mk", "\tcd $(CROSSPROF_SRCDIR) && \\",
     "    cd $(CROSSPROF_SRCDIR) &&  \\", "mk-indent"),
    ("package/crossprof/crossprof.mk", "\tcd $(CROSSPROF_SRCDIR) && \\",
     "\tcd $(CROSSPROF_SRCDIR) &&  \\", "space-before-backslash"),
    ("package/crossprof/crossprof.mk", "ifeq ($(BR2_PACKAGE_CROSSPROF_HEAP),y)",
     "ifdef BR2_PACKAGE_CROSSPROF_HEAP", "ifdef"),
    ("package/crossprof/crossprof.mk", "$(HOST_DIR)/bin/hostside", "$(HOST_DIR)/usr/bin/hostside",
     "host-dir-usr"),
    ("package/crossprof/crossprof.mk", "CROSSPROF_INSTALL_STAGING = YES",
     "CROSSPROF_INSTALL_STAGING = YES\nCROSSPROF_INSTALL_TARGET = YES", "useless-default"),
    ("package/crossprof/crossprof.mk", "CROSSPROF_CARGO_ENV = CARGO_PROFILE_RELEASE_STRIP=false",
     "CROSSPROF_CARGO_ENV = CARGO_PROFILE_RELEASE_STRIP=false\nCROSSPROF_SITE = https://x.invalid",
     "overridden-variable"),
    ("package/crossprof/crossprof.mk", "$(eval $(host-cargo-package))",
     "$(eval $(host-cargo-package))\n\n", "consecutive-empty-lines"),
    ("package/crossprof/crossprof.hash", "sha256  ", "sha256 ", "hash-spaces"),
    ("package/crossprof/crossprof.hash", "  LICENSE-APACHE", "0  LICENSE-APACHE", "hash-length"),
    ("external.desc", "name: CROSSPROF", "name: cross-prof", "external-desc"),
    ("board/crossprof/linux.fragment", "CONFIG_PERF_EVENTS=y", "CONFIG_PERF_EVENTS = y",
     "fragment-line"),
    ("board/crossprof/linux.fragment", "CONFIG_KALLSYMS=y", "CONFIG_KALLSYMS=y\nCONFIG_FTRACE=y",
     "fragment-redefined"),
]


def self_test():
    failures = 0
    clean = check_tree(REPO / "buildroot-pkg")
    if clean:
        print("self-test: the real tree must be clean first")
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        broken = pathlib.Path(tmp) / "buildroot-pkg"
        shutil.copytree(REPO / "buildroot-pkg", broken)
        expected = []
        for rel, old, new, rule in DEFECTS:
            p = broken / rel
            text = p.read_text()
            if old not in text:
                print(f"self-test: defect anchor not found in {rel}: {old!r}")
                failures += 1
                continue
            p.write_text(text.replace(old, new, 1))
            expected.append((rel, rule))
        found = check_tree(broken)
        fired = {(str(pathlib.Path(f).relative_to(broken)), r) for f, _, r, _ in found}
        for rel, rule in expected:
            if (rel, rule) not in fired:
                print(f"self-test: rule {rule} did not fire on {rel}")
                failures += 1
        print(f"self-test: {len(found)} findings on the broken copy, "
              f"{len(expected) - failures} of {len(expected)} defects caught")
    return 1 if failures else 0


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    tree = pathlib.Path(argv[1]).resolve() if len(argv) > 1 else REPO / "buildroot-pkg"
    findings = check_tree(tree)
    print_findings(findings, tree)
    print(f"buildroot style: {len(findings)} findings in {tree.name}/")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
