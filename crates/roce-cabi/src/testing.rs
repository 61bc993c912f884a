//! The checks the tests of roce-verbs, roce-verbs-so, roce-rdmacm and roce-rdmacm-so share:
//! a skip that fails under CI, the exported symbols of a library against its version script
//! and its importers (`objdump -T`, `ldd -r`), `repr(C)` layouts against a C header, and the
//! C test programs that print `ok …` / `FAIL …` lines (`c/check.h`).
//!
//! Test support: a missing tool or package is a skip (see [`skip_or_fail`]), anything else
//! that goes wrong is a panic, the test's failure report.

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A test that cannot run here (a package or a compiler is missing) says why and returns;
/// under `CI=true`, which installs everything, that is a failure instead.
pub fn skip_or_fail(why: &str) {
    assert!(
        std::env::var_os("CI").is_none_or(|v| v != "true"),
        "{why} (CI=true: not skipping)"
    );
    say_skipped(why);
}

/// Says that the running test skips, and why, where a person running `cargo test` sees it
/// without `--nocapture`: libtest captures `eprintln!`, not the process's standard error
/// itself, so the line is written there, named after the test (libtest names the test's
/// thread after it). Every test crate of the workspace skips through this.
pub fn say_skipped(why: &str) {
    use std::io::Write as _;
    let thread = std::thread::current();
    let test = thread
        .name()
        .filter(|name| *name != "main")
        .unwrap_or("a test");
    let _ = writeln!(std::io::stderr().lock(), "*** SKIPPED {test}: {why} ***");
}

/// The C compiler driver: `CC`, default `cc`.
pub fn cc() -> String {
    std::env::var("CC").unwrap_or_else(|_| "cc".into())
}

/// `/usr/lib/<arch>-linux-gnu/NAME`, where Debian puts a system library.
pub fn system_lib(name: &str) -> PathBuf {
    Path::new("/usr/lib")
        .join(format!("{}-linux-gnu", std::env::consts::ARCH))
        .join(name)
}

/// A `(version, name)` set: what a library defines or a program imports.
pub type Symbols = BTreeSet<(String, String)>;

/// `(version, name)` of the `objdump -T` lines of `file` whose version starts with `prefix`
/// (`IBVERBS_`): the defined ones (`undefined == false`) or the imports. `None` without
/// objdump.
pub fn versioned_symbols(file: &Path, prefix: &str, undefined: bool) -> Option<Symbols> {
    let out = Command::new("objdump").arg("-T").arg(file).output().ok()?;
    assert!(
        out.status.success(),
        "objdump -T {}: {}",
        file.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).expect("objdump prints text");
    let mut set = BTreeSet::new();
    for line in text.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [.., version, name] = fields[..] else {
            continue;
        };
        // Imports print their version in parentheses, as do hidden (non-default) versions.
        let version = version.trim_start_matches('(').trim_end_matches(')');
        if !version.starts_with(prefix) || version == name {
            continue;
        }
        if line.contains("*UND*") == undefined {
            set.insert((version.to_owned(), name.to_owned()));
        }
    }
    Some(set)
}

/// `(node, name)` for every name in the version script at `map`.
pub fn map_symbols(map: &Path) -> Symbols {
    let text =
        std::fs::read_to_string(map).unwrap_or_else(|e| panic!("read {}: {e}", map.display()));
    let mut set = BTreeSet::new();
    let mut node = None;
    for line in text.lines().map(str::trim) {
        if let Some(n) = line.strip_suffix(" {") {
            node = Some(n.to_owned());
        } else if let Some(name) = line.strip_suffix(';')
            && !name.contains(':')
            && !name.starts_with('}')
        {
            set.insert((
                node.clone().expect("names are inside a node"),
                name.to_owned(),
            ));
        }
    }
    set
}

/// Checks that a library defines exactly the names of its version script, each at its node.
pub fn check_exports(ours: &Symbols, map: &Symbols) {
    let missing: Vec<_> = map.difference(ours).collect();
    let extra: Vec<_> = ours.difference(map).collect();
    assert!(
        missing.is_empty(),
        "in the map but not defined: {missing:?}"
    );
    assert!(extra.is_empty(), "exported but not in the map: {extra:?}");
}

/// Checks that every file of `importers` (path, package) that is installed imports something
/// versioned `prefix` and nothing `ours` lacks; a missing file is a skip naming `install`.
pub fn check_imports(importers: &[(PathBuf, &str)], ours: &Symbols, prefix: &str, install: &str) {
    let mut checked = 0;
    let mut absent = Vec::new();
    let mut missing = Vec::new();
    for (file, package) in importers {
        if !file.exists() {
            absent.push(format!("{} ({package})", file.display()));
            continue;
        }
        let imports = versioned_symbols(file, prefix, true).expect("objdump ran before");
        assert!(
            !imports.is_empty(),
            "{} imports nothing versioned {prefix}*?",
            file.display()
        );
        for sym in imports.difference(ours) {
            missing.push(format!("{}: {}@{}", file.display(), sym.1, sym.0));
        }
        checked += 1;
    }
    assert!(
        missing.is_empty(),
        "imports we do not export:\n{}",
        missing.join("\n")
    );
    if !absent.is_empty() {
        skip_or_fail(&format!(
            "not installed, not checked: {} (apt-get install {install})",
            absent.join(", ")
        ));
    }
    eprintln!("{checked} programs and libraries checked");
}

/// Runs `ldd -r` on each installed program of `programs` (path, package) with
/// `LD_LIBRARY_PATH=search`: every relocation is performed as BIND_NOW would, none may fail,
/// and each `(soname, directory)` of `ours` must be loaded from that directory. A missing
/// program or ldd is a skip.
pub fn check_loader(programs: &[(PathBuf, &str)], search: &OsStr, ours: &[(&str, &Path)]) {
    let mut absent = Vec::new();
    for (file, package) in programs {
        if !file.exists() {
            absent.push(format!("{} ({package})", file.display()));
            continue;
        }
        let Ok(out) = Command::new("ldd")
            .arg("-r")
            .arg(file)
            .env("LD_LIBRARY_PATH", search)
            .output()
        else {
            return skip_or_fail("ldd not found (package libc-bin)");
        };
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        for (soname, dir) in ours {
            let line = text
                .lines()
                .find(|l| l.trim_start().starts_with(&format!("{soname} ")))
                .unwrap_or_else(|| panic!("{} does not load {soname}:\n{text}", file.display()));
            assert!(
                line.contains(&dir.display().to_string()),
                "{} loads another {soname}: {line}",
                file.display()
            );
        }
        for bad in ["undefined symbol", "not found", "no version information"] {
            assert!(!text.contains(bad), "{}: {bad}:\n{text}", file.display());
        }
    }
    if !absent.is_empty() {
        skip_or_fail(&format!(
            "not installed, not checked: {}",
            absent.join(", ")
        ));
    }
}

/// `(C expression, Rust value)` pairs, `sizeof(struct x)` or `offsetof(struct x, f)`, that a C
/// program compiled against a header must print alike ([`Layouts::check`]). Offsets are added
/// with [`offsets!`](crate::offsets).
#[derive(Debug, Default)]
pub struct Layouts(pub Vec<(String, usize)>);

impl Layouts {
    /// `sizeof(struct NAME)`.
    pub fn size<T>(&mut self, c_struct: &str) {
        self.value(format!("sizeof(struct {c_struct})"), size_of::<T>());
    }

    /// `sizeof(struct NAME)` and `_Alignof(struct NAME)`.
    pub fn size_align<T>(&mut self, c_struct: &str) {
        self.size::<T>(c_struct);
        self.value(format!("_Alignof(struct {c_struct})"), align_of::<T>());
    }

    /// Any C expression of type `size_t`.
    pub fn value(&mut self, c_expr: impl Into<String>, rust: usize) {
        self.0.push((c_expr.into(), rust));
    }

    /// Compiles a program that includes `header` (`<infiniband/verbs.h>`'s path under
    /// `/usr/include`) and prints every expression, and asserts each equals Rust's value. A
    /// missing header (`package` installs it) or compiler is a skip.
    pub fn check(&self, header: &str, package: &str) {
        let path = Path::new("/usr/include").join(header);
        if !path.exists() {
            return skip_or_fail(&format!("no {}: apt-get install {package}", path.display()));
        }
        // One directory per check: tests of one process may check the same header at once.
        static CHECKS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = CHECKS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!(
            "roce-cabi-layout-{}-{}-{n}",
            header.replace('/', "-"),
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).expect("create a temporary directory");
        let mut c = format!(
            "#include <stdio.h>\n#include <stddef.h>\n#include <{header}>\nint main(void) {{\n"
        );
        for (expr, _) in &self.0 {
            c.push_str(&format!("  printf(\"%zu\\n\", (size_t)({expr}));\n"));
        }
        c.push_str("  return 0;\n}\n");
        let src = dir.join("layout.c");
        let exe = dir.join("layout");
        std::fs::write(&src, c).expect("write layout.c");
        let cc = cc();
        let out = match Command::new(&cc).arg("-o").arg(&exe).arg(&src).output() {
            Ok(o) => o,
            Err(e) => return skip_or_fail(&format!("cannot run {cc}: {e}")),
        };
        assert!(
            out.status.success(),
            "{cc}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let out = Command::new(&exe).output().expect("run the layout program");
        let c_values: Vec<usize> = String::from_utf8(out.stdout)
            .expect("numbers")
            .lines()
            .map(|l| l.parse().expect("a number"))
            .collect();
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(c_values.len(), self.0.len(), "one line per expression");
        let wrong: Vec<String> = self
            .0
            .iter()
            .zip(&c_values)
            .filter(|((_, r), c)| r != *c)
            .map(|((e, r), c)| format!("{e}: C {c}, Rust {r}"))
            .collect();
        assert!(wrong.is_empty(), "layouts differ:\n{}", wrong.join("\n"));
    }
}

/// Adds `offsetof(struct C, cf)` = `offset_of!(T, f)` to a [`Layouts`] for each `f => "cf"`:
/// `offsets!(layouts, "ibv_mr", IbvMr, pd => "pd", addr => "addr")`.
#[macro_export]
macro_rules! offsets {
    ($l:expr, $c:literal, $t:ty, $($f:ident => $cf:literal),+ $(,)?) => {
        $( $l.value(
            format!("offsetof(struct {}, {})", $c, $cf),
            ::std::mem::offset_of!($t, $f),
        ); )+
    };
}

/// What a C test program printed, once it exited 0.
#[derive(Debug)]
pub struct CRun {
    /// Its `ok …` lines.
    pub ok: Vec<String>,
    /// All it printed on stdout.
    pub stdout: String,
    /// All it printed on stderr.
    pub stderr: String,
}

/// Builds the C program `src` (which includes `"check.h"`) against `header` (under
/// `/usr/include`; `package` installs it) and the libraries `link`, runs it with `env`, and
/// asserts it exited 0 (its exit status counts its failed CHECKs). `None`: skipped.
pub fn run_c_program(
    src: &Path,
    header: &str,
    package: &str,
    link: &[PathBuf],
    env: &[(&str, &OsStr)],
) -> Option<CRun> {
    let path = Path::new("/usr/include").join(header);
    if !path.exists() {
        skip_or_fail(&format!("no {}: apt-get install {package}", path.display()));
        return None;
    }
    let stem = src
        .file_stem()
        .map_or_else(String::new, |s| s.to_string_lossy().into_owned());
    let exe = std::env::temp_dir().join(format!("roce-cabi-{stem}-{}", std::process::id()));
    let cc = cc();
    let built = match Command::new(&cc)
        .args(["-Wall", "-Werror"])
        .arg(format!(
            "-I{}",
            Path::new(env!("CARGO_MANIFEST_DIR")).join("c").display()
        ))
        .arg("-o")
        .arg(&exe)
        .arg(src)
        .args(link)
        .output()
    {
        Ok(o) => o,
        Err(e) => {
            skip_or_fail(&format!("cannot run {cc}: {e}"));
            return None;
        }
    };
    assert!(
        built.status.success(),
        "{cc}: {}",
        String::from_utf8_lossy(&built.stderr)
    );
    let out = Command::new(&exe)
        .envs(env.iter().copied())
        .output()
        .expect("run the C program");
    let _ = std::fs::remove_file(&exe);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "{}: {:?}\n{stdout}\n{stderr}",
        src.display(),
        out.status
    );
    let ok = stdout
        .lines()
        .filter(|l| l.starts_with("ok "))
        .map(str::to_owned)
        .collect();
    Some(CRun { ok, stdout, stderr })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_version_script_gives_each_name_its_node() {
        let dir = std::env::temp_dir().join(format!("roce-cabi-map-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("tmp");
        let map = dir.join("x.map");
        std::fs::write(
            &map,
            "X_1.0 {\n  global:\n    a;\n    b;\n  local: *;\n};\nX_1.1 {\n  global:\n    c;\n} X_1.0;\n",
        )
        .expect("write");
        let set = map_symbols(&map);
        let _ = std::fs::remove_dir_all(&dir);
        let want: Symbols = [("X_1.0", "a"), ("X_1.0", "b"), ("X_1.1", "c")]
            .iter()
            .map(|(v, n)| ((*v).to_owned(), (*n).to_owned()))
            .collect();
        assert_eq!(set, want);
    }

    #[test]
    fn layouts_of_libc_structures_match_their_header() {
        #[repr(C)]
        #[allow(dead_code)]
        struct Timespec {
            tv_sec: i64,
            tv_nsec: i64,
        }
        let mut l = Layouts::default();
        l.size_align::<Timespec>("timespec");
        crate::offsets!(l, "timespec", Timespec, tv_sec => "tv_sec", tv_nsec => "tv_nsec");
        assert_eq!(l.0.len(), 4);
        assert_eq!(l.0[3], ("offsetof(struct timespec, tv_nsec)".to_owned(), 8));
        l.check("time.h", "libc6-dev");
    }

    #[test]
    fn a_wrong_layout_is_reported() {
        let mut l = Layouts::default();
        l.value("sizeof(struct timespec)", 3);
        let r = std::panic::catch_unwind(|| l.check("time.h", "libc6-dev"));
        if Path::new("/usr/include/time.h").exists() && Command::new(cc()).output().is_ok() {
            let e = r.expect_err("3 is not sizeof(struct timespec)");
            let msg = e.downcast_ref::<String>().cloned().unwrap_or_default();
            assert!(
                msg.contains("sizeof(struct timespec): C 16, Rust 3"),
                "{msg}"
            );
        }
    }
}
