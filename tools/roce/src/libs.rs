//! Where `roce exec` finds roce-emu's `libibverbs.so.1` and `librdmacm.so.1`.
//!
//! `--lib-dir` if given. Otherwise, first to last: `$ROCE_VERBS_LIB_DIR`; `roce-verbs/` beside
//! the executable; the directory the build linked them into (cargo's target directory: what
//! `cargo run` and `cargo test` use, the libraries with their debug sections); and last the
//! copies this executable carries ([`roce_verbs_so::carried`], [`roce_rdmacm_so::carried`]),
//! which is what an installed `roce` uses, `cargo install` having deleted the build's
//! directory. Those are written out on first use into a directory named after their contents,
//! so that two builds of `roce` never share one:
//!
//! - `$XDG_CACHE_HOME/roce-emu/KEY/` (when that is an absolute path), else
//!   `$HOME/.cache/roce-emu/KEY/`;
//! - where that cannot be written, `roce-emu-UID/KEY/` in the temporary directory (`$TMPDIR`
//!   or `/tmp`), a directory of mode 0700 that must be the user's own.
//!
//! A library already there is used only if it is a regular file, the same bytes, owned by the
//! user or root and writable by no one else (so another user's cache, read-only, still
//! serves); otherwise it is written again, to a temporary file renamed over it, so that a
//! program starting meanwhile loads either the old file or the new one, whole. Files are mode
//! 0644 and directories 0755 whatever the umask, so that the loader of any program `roce
//! exec` starts can read them. `ROCE_EXEC_NO_BUILD_DIR=1` skips the build's directory, to run
//! a `roce` from the build as an installed one runs.

use std::ffi::OsString;
use std::fs::{DirBuilder, File, OpenOptions};
use std::io::{ErrorKind, Read as _, Write as _};
use std::os::unix::fs::PermissionsExt as _;
use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};

/// Where the library is looked for before the others; `--lib-dir` overrides.
pub(crate) const LIB_DIR_ENV: &str = "ROCE_VERBS_LIB_DIR";

/// Set to `1`: the build's directory is not looked in.
pub(crate) const NO_BUILD_DIR_ENV: &str = "ROCE_EXEC_NO_BUILD_DIR";

/// The mode of a library written out.
const FILE_MODE: u32 = 0o644;
/// The mode of a directory made for them (and of the private one in the temp directory).
const DIR_MODE: u32 = 0o755;
const PRIVATE_MODE: u32 = 0o700;

/// The directory holding `libibverbs.so.1`: `lib_dir` (`--lib-dir`), else the first of the
/// places in the module's documentation that holds it. Absolute, so that a program that
/// changes its directory still finds it.
pub(crate) fn verbs_dir(lib_dir: Option<&Path>) -> anyhow::Result<PathBuf> {
    let soname = roce_verbs_so::SONAME;
    if let Some(dir) = lib_dir {
        if !readable(&dir.join(soname)) {
            bail!("no readable {soname} in {} (--lib-dir)", dir.display());
        }
        return absolute(dir);
    }
    let mut tried = Vec::new();
    let mut candidates: Vec<PathBuf> = std::env::var_os(LIB_DIR_ENV)
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .into_iter()
        .collect();
    candidates.extend(beside_exe("roce-verbs"));
    candidates.extend(build_dir(roce_verbs_so::library_dir()));
    for dir in candidates {
        if readable(&dir.join(soname)) {
            return absolute(&dir);
        }
        tried.push(dir.display().to_string());
    }
    carried_dir().with_context(|| {
        format!(
            "no {soname} in {}, and the copy roce carries cannot be written out",
            if tried.is_empty() {
                "the build's directory".to_owned()
            } else {
                tried.join(", ")
            }
        )
    })
}

/// The directory holding roce-emu's `librdmacm.so.1`: `verbs_dir` if it does, else
/// `roce-rdmacm/` beside the executable, the build's directory, or the carried copy. `None`
/// (said on stderr) if even that fails: verbs programs run without it.
pub(crate) fn rdmacm_dir(verbs_dir: &Path) -> Option<PathBuf> {
    let soname = roce_rdmacm_so::SONAME;
    let mut candidates = vec![verbs_dir.to_path_buf()];
    candidates.extend(beside_exe("roce-rdmacm"));
    candidates.extend(build_dir(roce_rdmacm_so::library_dir()));
    if let Some(dir) = candidates.into_iter().find(|d| readable(&d.join(soname))) {
        return absolute(&dir).ok();
    }
    match carried_dir() {
        Ok(dir) => Some(dir),
        Err(err) => {
            eprintln!("roce exec: no {soname} for RDMA CM programs: {err:#}");
            None
        }
    }
}

/// `name` in the executable's directory (an install that put the libraries beside it).
fn beside_exe(name: &str) -> Option<PathBuf> {
    std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(|d| d.join(name)))
}

/// `dir`, the build's directory, unless [`NO_BUILD_DIR_ENV`] says to skip it.
fn build_dir(dir: &Path) -> Option<PathBuf> {
    let skip = std::env::var_os(NO_BUILD_DIR_ENV).is_some_and(|v| !v.is_empty() && v != "0");
    (!skip).then(|| dir.to_path_buf())
}

/// Whether `path` is a file this process can open.
fn readable(path: &Path) -> bool {
    File::open(path).is_ok_and(|f| f.metadata().is_ok_and(|m| m.is_file()))
}

fn absolute(dir: &Path) -> anyhow::Result<PathBuf> {
    std::path::absolute(dir).with_context(|| format!("{}: no absolute path", dir.display()))
}

/// The libraries this executable carries, by file name.
fn carried() -> [(&'static str, &'static [u8]); 2] {
    [
        (roce_verbs_so::SONAME, roce_verbs_so::carried()),
        (roce_rdmacm_so::SONAME, roce_rdmacm_so::carried()),
    ]
}

/// The name of their directory: their hashes, which the build computed.
fn carried_key() -> String {
    format!(
        "{}-{}",
        roce_verbs_so::CARRIED_HASH,
        roce_rdmacm_so::CARRIED_HASH
    )
}

/// The carried libraries, written out (or found already written) where the module's
/// documentation says.
fn carried_dir() -> anyhow::Result<PathBuf> {
    let env = |name: &str| std::env::var_os(name);
    let bases = bases(&env, &std::env::temp_dir(), nix::unistd::geteuid().as_raw());
    write_out(&bases, &carried_key(), &carried())
}

/// A directory the libraries' directory may be made in.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Base {
    /// The user's cache (`…/roce-emu`): made, parents and all, if missing.
    Cache(PathBuf),
    /// `roce-emu-UID` in the temporary directory: made 0700 if missing, else used only if it
    /// is a directory of this user's that no one else may enter.
    Private(PathBuf),
}

/// The bases, first to last, from the environment (`env`), the temporary directory and the
/// effective uid. An `XDG_CACHE_HOME` or `HOME` that is not absolute is ignored, as the XDG
/// base directory specification says.
fn bases(env: &dyn Fn(&str) -> Option<OsString>, tmp: &Path, uid: u32) -> Vec<Base> {
    let absolute = |name: &str| env(name).map(PathBuf::from).filter(|p| p.is_absolute());
    let cache = absolute("XDG_CACHE_HOME").or_else(|| absolute("HOME").map(|h| h.join(".cache")));
    let mut bases: Vec<Base> = cache
        .map(|c| Base::Cache(c.join("roce-emu")))
        .into_iter()
        .collect();
    bases.push(Base::Private(tmp.join(format!("roce-emu-{uid}"))));
    bases
}

/// `libs` in `base/key/` for the first base where that works: its path, or every base's
/// failure.
fn write_out(bases: &[Base], key: &str, libs: &[(&str, &[u8])]) -> anyhow::Result<PathBuf> {
    let uid = nix::unistd::geteuid().as_raw();
    let mut failures = Vec::new();
    for base in bases {
        let made = match base {
            Base::Cache(dir) => make_cache(dir),
            Base::Private(dir) => make_private(dir, uid),
        }
        .and_then(|base| {
            let dir = base.join(key);
            make_dir(&dir)?;
            trusted(&dir, uid)?;
            for (name, bytes) in libs {
                fill(&dir, name, bytes, uid)?;
            }
            Ok(dir)
        });
        match made {
            Ok(dir) => return Ok(dir),
            Err(err) => failures.push(format!("{err:#}")),
        }
    }
    bail!("{}", failures.join("; "))
}

/// The cache base, made (its parents 0700 as XDG asks of a cache directory, itself 0755) if
/// missing.
fn make_cache(dir: &Path) -> anyhow::Result<PathBuf> {
    if let Some(parent) = dir.parent()
        && !parent.is_dir()
    {
        DirBuilder::new()
            .recursive(true)
            .mode(PRIVATE_MODE)
            .create(parent)
            .with_context(|| format!("cannot make {}", parent.display()))?;
    }
    make_dir(dir)?;
    Ok(dir.to_path_buf())
}

/// `dir` made 0755 (whatever the umask) unless it exists.
fn make_dir(dir: &Path) -> anyhow::Result<()> {
    match DirBuilder::new().mode(DIR_MODE).create(dir) {
        Ok(()) => std::fs::set_permissions(dir, std::fs::Permissions::from_mode(DIR_MODE))
            .with_context(|| format!("cannot set the mode of {}", dir.display())),
        Err(e) if e.kind() == ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e).with_context(|| format!("cannot make {}", dir.display())),
    }
}

/// The private base, made 0700 if missing; an existing one must be a directory (not a link)
/// of `uid`'s that no one else may enter: in a shared /tmp another user could have made it.
fn make_private(dir: &Path, uid: u32) -> anyhow::Result<PathBuf> {
    match DirBuilder::new().mode(PRIVATE_MODE).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e).with_context(|| format!("cannot make {}", dir.display())),
    }
    let meta = std::fs::symlink_metadata(dir)
        .with_context(|| format!("cannot look at {}", dir.display()))?;
    if !meta.is_dir() || meta.uid() != uid || meta.mode() & 0o077 != 0 {
        bail!(
            "{} is not a private directory of uid {uid} (mode {:o}, owner {})",
            dir.display(),
            meta.mode() & 0o7777,
            meta.uid()
        );
    }
    Ok(dir.to_path_buf())
}

/// Whether what `path` names may be trusted to stay as it is: not a link, owned by `uid` or
/// root, writable by neither group nor others.
fn trusted(path: &Path, uid: u32) -> anyhow::Result<std::fs::Metadata> {
    let meta = std::fs::symlink_metadata(path)
        .with_context(|| format!("cannot look at {}", path.display()))?;
    if meta.file_type().is_symlink()
        || (meta.uid() != uid && meta.uid() != 0)
        || meta.mode() & 0o022 != 0
    {
        bail!(
            "{} may be changed by others (mode {:o}, owner {})",
            path.display(),
            meta.mode() & 0o7777,
            meta.uid()
        );
    }
    Ok(meta)
}

/// `dir/name` holding `bytes`: kept if it already does (and is [`trusted`]), else written.
fn fill(dir: &Path, name: &str, bytes: &[u8], uid: u32) -> anyhow::Result<()> {
    let path = dir.join(name);
    if holds(&path, bytes, uid) {
        return Ok(());
    }
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let written = write_file(&tmp, bytes).and_then(|()| {
        std::fs::rename(&tmp, &path)
            .with_context(|| format!("cannot rename {} to {}", tmp.display(), path.display()))
    });
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// Whether `path` is a trusted regular file with exactly `bytes`.
fn holds(path: &Path, bytes: &[u8], uid: u32) -> bool {
    let Ok(meta) = trusted(path, uid) else {
        return false;
    };
    if !meta.is_file() || meta.len() != bytes.len() as u64 {
        return false;
    }
    let mut have = Vec::with_capacity(bytes.len());
    File::open(path)
        .and_then(|mut f| f.read_to_end(&mut have))
        .is_ok_and(|_| have == bytes)
}

/// A new file `path` (none may be there) holding `bytes`, mode 0644, on disk.
fn write_file(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let _ = std::fs::remove_file(path);
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(FILE_MODE)
        .open(path)
        .with_context(|| format!("cannot create {}", path.display()))?;
    file.write_all(bytes)
        .and_then(|()| file.set_permissions(std::fs::Permissions::from_mode(FILE_MODE)))
        .and_then(|()| file.sync_all())
        .with_context(|| format!("cannot write {}", path.display()))
}

/// For the tests: a link, as another user might plant.
#[cfg(test)]
fn plant_link(target: &Path, link: &Path) {
    std::os::unix::fs::symlink(target, link).unwrap();
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // test code: a panic is the failure report

    use super::*;

    /// A fresh directory for one test.
    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("roce-libs-test-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn mode(path: &Path) -> u32 {
        std::fs::symlink_metadata(path).unwrap().mode() & 0o7777
    }

    fn inode(path: &Path) -> u64 {
        std::fs::symlink_metadata(path).unwrap().ino()
    }

    const LIBS: [(&str, &[u8]); 2] = [("liba.so.1", b"\x7fELF a"), ("libb.so.1", b"\x7fELF bb")];

    #[test]
    fn the_libraries_are_written_once_readable_by_all_and_reused() {
        let root = scratch("once");
        let base = Base::Cache(root.join("cache/roce-emu"));
        let dir = write_out(std::slice::from_ref(&base), "k1", &LIBS).unwrap();
        assert_eq!(dir, root.join("cache/roce-emu/k1"));
        for (name, bytes) in LIBS {
            assert_eq!(std::fs::read(dir.join(name)).unwrap(), bytes);
            assert_eq!(mode(&dir.join(name)), FILE_MODE, "{name}");
        }
        assert_eq!(mode(&dir), DIR_MODE);
        assert_eq!(mode(&root.join("cache/roce-emu")), DIR_MODE);
        // The cache's parent, made here, is private as XDG asks.
        assert_eq!(mode(&root.join("cache")), PRIVATE_MODE);
        // No temporary file left behind.
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), LIBS.len());
        // Used again as it is: the same files.
        let before = inode(&dir.join("liba.so.1"));
        assert_eq!(write_out(&[base], "k1", &LIBS).unwrap(), dir);
        assert_eq!(inode(&dir.join("liba.so.1")), before);
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn a_changed_truncated_or_linked_library_is_written_again() {
        let root = scratch("changed");
        let base = [Base::Cache(root.join("roce-emu"))];
        let dir = write_out(&base, "k", &LIBS).unwrap();
        // Same length, other bytes.
        std::fs::write(dir.join("liba.so.1"), b"\x7fELF z").unwrap();
        // Cut short, as by a crash (though writes are renamed into place).
        std::fs::write(dir.join("libb.so.1"), b"\x7fE").unwrap();
        write_out(&base, "k", &LIBS).unwrap();
        assert_eq!(std::fs::read(dir.join("liba.so.1")).unwrap(), LIBS[0].1);
        assert_eq!(std::fs::read(dir.join("libb.so.1")).unwrap(), LIBS[1].1);
        // A link to a file with the right bytes is not kept: the file could change after the
        // check. The link itself is replaced, not what it points to.
        let elsewhere = root.join("elsewhere");
        std::fs::write(&elsewhere, LIBS[0].1).unwrap();
        std::fs::remove_file(dir.join("liba.so.1")).unwrap();
        plant_link(&elsewhere, &dir.join("liba.so.1"));
        write_out(&base, "k", &LIBS).unwrap();
        assert!(
            std::fs::symlink_metadata(dir.join("liba.so.1"))
                .unwrap()
                .is_file()
        );
        assert_eq!(std::fs::read(&elsewhere).unwrap(), LIBS[0].1);
        // A file others may write is replaced by one they may not.
        std::fs::set_permissions(
            dir.join("libb.so.1"),
            std::fs::Permissions::from_mode(0o666),
        )
        .unwrap();
        write_out(&base, "k", &LIBS).unwrap();
        assert_eq!(mode(&dir.join("libb.so.1")), FILE_MODE);
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn another_key_is_another_directory() {
        let root = scratch("keys");
        let base = [Base::Cache(root.join("roce-emu"))];
        let one = write_out(&base, "k1", &LIBS).unwrap();
        let other: [(&str, &[u8]); 1] = [("liba.so.1", b"newer")];
        let two = write_out(&base, "k2", &other).unwrap();
        assert_ne!(one, two);
        assert_eq!(std::fs::read(one.join("liba.so.1")).unwrap(), LIBS[0].1);
        assert_eq!(std::fs::read(two.join("liba.so.1")).unwrap(), b"newer");
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn a_cache_that_cannot_be_made_gives_way_to_the_private_directory() {
        let root = scratch("fallback");
        // A file where the cache's directory would be.
        std::fs::write(root.join("cache"), b"not a directory").unwrap();
        let uid = nix::unistd::geteuid().as_raw();
        let bases = [
            Base::Cache(root.join("cache/roce-emu")),
            Base::Private(root.join(format!("roce-emu-{uid}"))),
        ];
        let dir = write_out(&bases, "k", &LIBS).unwrap();
        assert_eq!(dir, root.join(format!("roce-emu-{uid}/k")));
        assert_eq!(mode(&root.join(format!("roce-emu-{uid}"))), PRIVATE_MODE);
        assert_eq!(std::fs::read(dir.join("libb.so.1")).unwrap(), LIBS[1].1);
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn a_private_directory_others_may_enter_or_a_link_is_refused() {
        let root = scratch("private");
        let uid = nix::unistd::geteuid().as_raw();
        let private = root.join(format!("roce-emu-{uid}"));
        std::fs::create_dir(&private).unwrap();
        std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o777)).unwrap();
        let err = write_out(&[Base::Private(private.clone())], "k", &LIBS).unwrap_err();
        assert!(
            format!("{err:#}").contains("not a private directory"),
            "{err:#}"
        );
        assert!(!private.join("k").exists());
        // A link to a directory that is private is refused too: it is not the directory.
        std::fs::remove_dir(&private).unwrap();
        let real = root.join("real");
        std::fs::create_dir(&real).unwrap();
        std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o700)).unwrap();
        plant_link(&real, &private);
        assert!(write_out(&[Base::Private(private)], "k", &LIBS).is_err());
        assert!(!real.join("k").exists());
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn all_bases_failing_says_why_for_each() {
        let root = scratch("none");
        std::fs::write(root.join("file"), b"").unwrap();
        let bases = [
            Base::Cache(root.join("file/roce-emu")),
            Base::Private(root.join("file/roce-emu-1")),
        ];
        let err = format!("{:#}", write_out(&bases, "k", &LIBS).unwrap_err());
        let parts: Vec<&str> = err.split("; ").collect();
        assert_eq!(parts.len(), 2, "{err}");
        assert!(parts[0].contains("none/file:"), "{err}");
        assert!(parts[1].contains("none/file/roce-emu-1:"), "{err}");
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn the_cache_is_xdg_cache_home_else_home_dot_cache_then_the_temp_directory() {
        let tmp = Path::new("/tmp");
        let env = |vars: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                vars.iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| OsString::from(v))
            }
        };
        let private = Base::Private(PathBuf::from("/tmp/roce-emu-1000"));
        assert_eq!(
            bases(
                &env(&[("XDG_CACHE_HOME", "/x/cache"), ("HOME", "/home/u")]),
                tmp,
                1000
            ),
            [Base::Cache("/x/cache/roce-emu".into()), private.clone()]
        );
        // Relative paths are ignored (XDG base directory specification).
        assert_eq!(
            bases(
                &env(&[("XDG_CACHE_HOME", "cache"), ("HOME", "/home/u")]),
                tmp,
                1000
            ),
            [
                Base::Cache("/home/u/.cache/roce-emu".into()),
                private.clone()
            ]
        );
        assert_eq!(
            bases(&env(&[("HOME", "")]), tmp, 1000),
            std::slice::from_ref(&private)
        );
        assert_eq!(bases(&env(&[]), tmp, 1000), [private]);
    }

    #[test]
    fn the_carried_libraries_are_elf_with_their_sonames_and_keyed_by_content() {
        for (name, bytes) in carried() {
            assert!(bytes.starts_with(b"\x7fELF"), "{name}");
            // The soname is in the dynamic string table.
            assert!(
                bytes
                    .windows(name.len() + 1)
                    .any(|w| w[..name.len()] == *name.as_bytes() && w[name.len()] == 0),
                "{name}"
            );
        }
        // The key is the FNV-1a of each library, as the build computed it.
        let fnv = |bytes: &[u8]| {
            bytes.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, &b| {
                (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
            })
        };
        let [(_, verbs), (_, rdmacm)] = carried();
        assert_eq!(
            carried_key(),
            format!("{:016x}-{:016x}", fnv(verbs), fnv(rdmacm))
        );
    }
}
