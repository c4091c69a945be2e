//! The CUDA context of the GPU engine: driver and NVRTC presence checks, run-time
//! compilation of the kernel files in `cuda/` for the device's architecture, and the
//! loaded kernels.
//!
//! Each kernel file (`cuda/<file>.cu`) is one NVRTC program, compiled with the shared
//! headers (`cuda/include/*.cuh` and the policy table `cuda/kernels.def`) handed to NVRTC
//! by name, so `#include "tree.cuh"` resolves without any file on disk. The files compile
//! in parallel, one thread each. A device loads each file's machine code from the
//! on-disk cache of [`super::kernel_cache`] when an entry for exactly these sources,
//! this architecture and this NVRTC is there, and compiles (and stores) it otherwise.

use std::borrow::Cow;
use std::collections::HashMap;
use std::ffi::{c_char, c_int, CString};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use cudarc::driver::{CudaContext, CudaFunction, CudaSlice, CudaStream, DeviceRepr, DriverError};
use cudarc::nvrtc::{result as nvrtc, sys as nvrtc_sys, Ptx};

use super::{kernel_cache, policy};
use crate::engine::{EngineError, Result};

/// The shared headers, by the name the kernel files include them with.
const HEADERS: &[(&str, &str)] = &[
    ("base.cuh", include_str!("../../../cuda/include/base.cuh")),
    (
        "params.cuh",
        include_str!("../../../cuda/include/params.cuh"),
    ),
    ("warp.cuh", include_str!("../../../cuda/include/warp.cuh")),
    ("tree.cuh", include_str!("../../../cuda/include/tree.cuh")),
    (
        "semirings.cuh",
        include_str!("../../../cuda/include/semirings.cuh"),
    ),
    (
        "leaf_blocks.cuh",
        include_str!("../../../cuda/include/leaf_blocks.cuh"),
    ),
    (
        "leaf_rows.cuh",
        include_str!("../../../cuda/include/leaf_rows.cuh"),
    ),
    (
        "kernels.cuh",
        include_str!("../../../cuda/include/kernels.cuh"),
    ),
    ("kernels.def", policy::TABLE_SOURCE),
];

/// The kernel files, by name (`cuda/<name>.cu`), each a module of its own.
const FILES: &[(&str, &str)] = &[
    ("descent", include_str!("../../../cuda/descent.cu")),
    (
        "leaves_codes",
        include_str!("../../../cuda/leaves_codes.cu"),
    ),
    ("octets", include_str!("../../../cuda/octets.cu")),
    (
        "leaves_blocks",
        include_str!("../../../cuda/leaves_blocks.cu"),
    ),
    ("subtrees", include_str!("../../../cuda/subtrees.cu")),
    ("lone_cells", include_str!("../../../cuda/lone_cells.cu")),
    ("row_stores", include_str!("../../../cuda/row_stores.cu")),
    ("bits", include_str!("../../../cuda/bits.cu")),
    ("scan", include_str!("../../../cuda/scan.cu")),
];

/// Whether libcuda can be loaded. cudarc panics on its first call when it cannot, so
/// this is checked before anything else.
pub(crate) fn driver_present() -> bool {
    static DRIVER: OnceLock<bool> = OnceLock::new();
    *DRIVER.get_or_init(|| keep_loaded(&["cuda", "nvcuda"]))
}

/// Whether libnvrtc can be loaded. cudarc panics on its first call when it cannot, so
/// this is checked before compiling kernels.
pub fn nvrtc_present() -> bool {
    static NVRTC: OnceLock<bool> = OnceLock::new();
    *NVRTC.get_or_init(|| keep_loaded(&["nvrtc"]))
}

/// Whether a library of one of `names` loads under one of the file names cudarc tries, in
/// cudarc's order. The one found stays loaded for the life of the process: cudarc's own
/// load of it then finds it in memory, where a probe that closed it would make the
/// dynamic loader map and relocate it twice.
fn keep_loaded(names: &[&str]) -> bool {
    let mut candidates = names
        .iter()
        .flat_map(|n| cudarc::get_lib_name_candidates(n));
    candidates.any(|candidate| {
        // SAFETY: loading the CUDA libraries runs no initialisers that assume anything of
        // the caller; the handle is leaked on purpose, so nothing is unloaded.
        match unsafe { libloading::Library::new(candidate) } {
            Ok(lib) => {
                std::mem::forget(lib);
                true
            }
            Err(_) => false,
        }
    })
}

/// One kernel file compiled by [`compile_kernels`].
#[derive(Clone, Debug)]
pub struct CompiledFile {
    /// The file's name (`cuda/<name>.cu`).
    pub name: &'static str,
    /// Its PTX.
    pub ptx: String,
    /// The kernels the engine launches from it (its rows of `cuda/kernels.def`), each with
    /// whether the engine may launch it to overlap the previous kernel of its stream: such
    /// a kernel must wait for that kernel (`griddepcontrol.wait` on sm_90 and later)
    /// before it touches memory the kernel writes.
    pub kernels: Vec<(&'static str, bool)>,
}

/// Compiles every kernel file for `arch` (e.g. `sm_90`) with NVRTC, as the engine does
/// when it opens a device: the PTX of each file and the kernels the engine launches from
/// it.
///
/// Needs libnvrtc but no GPU, so CI checks that every kernel compiles. Call
/// [`nvrtc_present`] first: cudarc panics without the library.
///
/// With the environment variable `K2RPQ_KERNEL_DIR` set, the sources are read from that
/// folder (a copy of `cuda/`: `<file>.cu`, `kernels.def`, `include/*.cuh`) instead of the
/// ones built into the binary: a kernel can then be changed and measured on a device
/// without rebuilding, as long as its name and parameters stay the same (the engine
/// chooses kernels from the table built into it).
pub fn compile_kernels(arch: &str) -> Result<Vec<CompiledFile>> {
    let dir = std::env::var_os("K2RPQ_KERNEL_DIR").map(PathBuf::from);
    let sources = KernelSources::read(dir.as_deref())?;
    let mut kernels = policy::file_kernels()?;
    sources
        .compile(arch)?
        .into_iter()
        .map(|(name, ptx)| {
            let at = kernels.iter().position(|(f, _)| *f == name);
            Ok(CompiledFile {
                name,
                ptx,
                kernels: at.map(|i| kernels.swap_remove(i).1).unwrap_or_default(),
            })
        })
        .collect()
}

/// The text of the kernel sources: the headers' and each file's, by name.
struct KernelSources {
    headers: Vec<(&'static str, Cow<'static, str>)>,
    files: Vec<(&'static str, Cow<'static, str>)>,
}

impl KernelSources {
    /// The sources as built into the binary, or with `dir` read from `dir` (a copy of
    /// `cuda/`). Every file is read before anything is compiled, so a missing one is
    /// reported by its path.
    fn read(dir: Option<&Path>) -> Result<KernelSources> {
        let read = |path: &str, built_in: &'static str| -> Result<Cow<'static, str>> {
            let Some(d) = dir else {
                return Ok(built_in.into());
            };
            let path = d.join(path);
            std::fs::read_to_string(&path)
                .map(Into::into)
                .map_err(|e| EngineError::Cuda(format!("kernel source {}: {e}", path.display())))
        };
        let headers = HEADERS
            .iter()
            .map(|&(name, built_in)| {
                let path = match name {
                    "kernels.def" => name.to_string(),
                    _ => format!("include/{name}"),
                };
                Ok((name, read(&path, built_in)?))
            })
            .collect::<Result<_>>()?;
        let files = FILES
            .iter()
            .map(|&(name, built_in)| Ok((name, read(&format!("{name}.cu"), built_in)?)))
            .collect::<Result<_>>()?;
        Ok(KernelSources { headers, files })
    }

    /// Compiles every file for `arch`, one thread each: `(file, PTX)` in [`FILES`] order.
    fn compile(&self, arch: &str) -> Result<Vec<(&'static str, String)>> {
        std::thread::scope(|s| {
            let threads: Vec<_> = self
                .files
                .iter()
                .map(|(name, text)| {
                    let ptx = move || {
                        let ptx = self.compile_file(name, text, arch, Output::Ptx)?;
                        Ok(c_text(
                            &ptx.iter().map(|&b| b as c_char).collect::<Vec<_>>(),
                        ))
                    };
                    (name, s.spawn(ptx))
                })
                .collect();
            threads
                .into_iter()
                .map(|(&name, t)| {
                    let ptx = t.join().unwrap_or_else(|_| {
                        Err(EngineError::Cuda(format!("NVRTC panicked on {name}.cu")))
                    })?;
                    Ok((name, ptx))
                })
                .collect()
        })
    }

    /// The machine code of every file for the device's `arch`, one thread each, in
    /// [`FILES`] order: from the on-disk cache where an entry is whole, else compiled and
    /// stored.
    fn machine_code(&self, arch: &str, cache: Option<&Path>) -> Result<Vec<(&'static str, Code)>> {
        let version = nvrtc_version();
        std::thread::scope(|s| {
            let threads: Vec<_> = self
                .files
                .iter()
                .map(|&(name, ref text)| {
                    let key = self.cache_key(name, text, arch, &version);
                    let job = move || -> Result<Code> {
                        if let Some(code) = cache.and_then(|d| kernel_cache::read(d, &key)) {
                            return Ok(Code { code, cached: true });
                        }
                        let code = self.compile_file(name, text, arch, Output::Cubin)?;
                        if let Some(d) = cache {
                            // A cache that cannot be written only costs the next start time.
                            let _ = kernel_cache::write(d, &key, &code);
                        }
                        Ok(Code {
                            code,
                            cached: false,
                        })
                    };
                    (name, s.spawn(job))
                })
                .collect();
            threads
                .into_iter()
                .map(|(name, t)| {
                    let code = t.join().unwrap_or_else(|_| {
                        Err(EngineError::Cuda(format!("NVRTC panicked on {name}.cu")))
                    })?;
                    Ok((name, code))
                })
                .collect()
        })
    }

    /// The cache entry of file `name` compiled for `arch` by NVRTC `version`.
    fn cache_key(&self, name: &str, text: &str, arch: &str, version: &str) -> String {
        let mut parts: Vec<&[u8]> = vec![text.as_bytes(), arch.as_bytes(), version.as_bytes()];
        parts.extend(COMPILE_OPTIONS.iter().map(|o| o.as_bytes()));
        for (n, t) in &self.headers {
            parts.push(n.as_bytes());
            parts.push(t.as_bytes());
        }
        kernel_cache::key(name, &parts)
    }

    /// Compiles kernel file `name` (text `text`) for `arch` with the headers: its PTX or
    /// its machine code (CUBIN, for a real architecture such as `sm_90`).
    fn compile_file(&self, name: &str, text: &str, arch: &str, output: Output) -> Result<Vec<u8>> {
        let file = format!("{name}.cu");
        let c = |s: &str| {
            CString::new(s)
                .map_err(|_| EngineError::Cuda(format!("{file}: a NUL byte in the sources")))
        };
        let (src, program_name) = (c(text)?, c(&file)?);
        let texts = self
            .headers
            .iter()
            .map(|(_, t)| c(t))
            .collect::<Result<Vec<_>>>()?;
        let names = self
            .headers
            .iter()
            .map(|(n, _)| c(n))
            .collect::<Result<Vec<_>>>()?;
        let text_ptrs: Vec<*const c_char> = texts.iter().map(|t| t.as_ptr()).collect();
        let name_ptrs: Vec<*const c_char> = names.iter().map(|n| n.as_ptr()).collect();
        let mut prog = std::mem::MaybeUninit::uninit();
        // SAFETY: every pointer is to a NUL-terminated string that outlives the program
        // (the program is destroyed at the end of this function), and the two arrays hold
        // `headers.len()` of them each.
        unsafe {
            nvrtc_sys::nvrtcCreateProgram(
                prog.as_mut_ptr(),
                src.as_ptr(),
                program_name.as_ptr(),
                self.headers.len() as c_int,
                text_ptrs.as_ptr(),
                name_ptrs.as_ptr(),
            )
        }
        .result()
        .map_err(|e| EngineError::Cuda(format!("NVRTC {file}: {e:?}")))?;
        // SAFETY: nvrtcCreateProgram succeeded, so it wrote the program.
        let prog = Program(unsafe { prog.assume_init() });
        let mut options = vec![format!("--gpu-architecture={arch}")];
        options.extend(COMPILE_OPTIONS.iter().map(|o| o.to_string()));
        // SAFETY: `prog.0` is a live program (destroyed only when `prog` drops).
        if let Err(e) = unsafe { nvrtc::compile_program(prog.0, &options) } {
            // SAFETY: as above.
            let log = unsafe { nvrtc::get_program_log(prog.0) }
                .map(|l| c_text(&l))
                .unwrap_or_else(|_| format!("{e:?}"));
            return Err(EngineError::Cuda(format!("NVRTC {file}: {log}")));
        }
        let fail = |e: &dyn std::fmt::Debug| EngineError::Cuda(format!("NVRTC {file}: {e:?}"));
        match output {
            Output::Ptx => {
                // SAFETY: as above; the program compiled.
                let ptx = unsafe { nvrtc::get_ptx(prog.0) }.map_err(|e| fail(&e))?;
                Ok(ptx.iter().map(|&c| c as u8).collect())
            }
            Output::Cubin => {
                let mut size = 0usize;
                // SAFETY: as above; `size` receives the CUBIN's length.
                unsafe { nvrtc_sys::nvrtcGetCUBINSize(prog.0, &mut size) }
                    .result()
                    .map_err(|e| fail(&e))?;
                let mut cubin = vec![0u8; size];
                // SAFETY: as above; `cubin` holds the `size` bytes NVRTC writes.
                unsafe { nvrtc_sys::nvrtcGetCUBIN(prog.0, cubin.as_mut_ptr() as *mut c_char) }
                    .result()
                    .map_err(|e| fail(&e))?;
                Ok(cubin)
            }
        }
    }
}

/// A kernel file's machine code, and whether it came from the on-disk cache.
struct Code {
    code: Vec<u8>,
    cached: bool,
}

/// What [`KernelSources::compile_file`] returns.
#[derive(Clone, Copy)]
enum Output {
    /// PTX text (for any architecture; what CI's check compiles).
    Ptx,
    /// Machine code for a real architecture (what a device loads).
    Cubin,
}

/// NVRTC's options besides the architecture.
const COMPILE_OPTIONS: &[&str] = &["-std=c++17"];

/// NVRTC's version, `major.minor` (part of every cache key).
fn nvrtc_version() -> String {
    let (mut major, mut minor) = (0, 0);
    // SAFETY: writes two integers.
    match unsafe { nvrtc_sys::nvrtcVersion(&mut major, &mut minor) }.result() {
        Ok(()) => format!("{major}.{minor}"),
        Err(_) => "unknown".into(),
    }
}

/// An NVRTC program, destroyed on drop.
struct Program(nvrtc_sys::nvrtcProgram);

impl Drop for Program {
    fn drop(&mut self) {
        // SAFETY: the program was created by nvrtcCreateProgram and is destroyed once.
        let _ = unsafe { nvrtc::destroy_program(self.0) };
    }
}

/// The text of a NUL-terminated buffer NVRTC filled.
fn c_text(buf: &[c_char]) -> String {
    let bytes: Vec<u8> = buf
        .iter()
        .take_while(|&&b| b != 0)
        .map(|&b| b as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Converts a driver error into the engine's error.
pub(crate) fn cuda_err(what: &str) -> impl FnOnce(DriverError) -> EngineError + '_ {
    move |e| EngineError::Cuda(format!("{what}: {e:?}"))
}

/// Freed stream-ordered memory the device's default pool keeps mapped across
/// synchronisations. The driver's default, 0, unmaps every freed block at the next
/// synchronisation, so each query mapped its bit batches and product scratch afresh
/// (~2 ms of a 1-row `<c> p+ ?y` on cnr-2000 with every product on the H200).
pub(crate) const POOL_KEEP_BYTES: u64 = 1 << 30;

/// Sets the release threshold of `ctx`'s device's default memory pool to
/// [`POOL_KEEP_BYTES`]. Best effort: a device without memory pools keeps the default.
fn keep_pool_memory(ctx: &CudaContext) {
    use cudarc::driver::sys;
    let mut pool: sys::CUmemoryPool = std::ptr::null_mut();
    let mut keep: u64 = POOL_KEEP_BYTES;
    // SAFETY: `pool` is written by the driver before it is read; the attribute takes a
    // pointer to a `cuuint64_t`, which `keep` is, and outlives the call.
    let _ = ctx.bind_to_thread().and_then(|()| unsafe {
        sys::cuDeviceGetDefaultMemPool(&mut pool, ctx.cu_device()).result()?;
        sys::cuMemPoolSetAttribute(
            pool,
            sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
            (&mut keep as *mut u64).cast(),
        )
        .result()
    });
}

/// A device context, its stream and the compiled kernels.
pub(crate) struct GpuContext {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    functions: HashMap<&'static str, CudaFunction>,
    compute_major: i32,
}

impl GpuContext {
    /// Takes device context `ctx`, compiles the kernels for its compute capability and
    /// loads them. Event tracking is turned off for the context: the engine orders all its
    /// work on one stream, and CUDA graph capture requires it off.
    pub(crate) fn new(ctx: Arc<CudaContext>) -> Result<Self> {
        let started = std::time::Instant::now();
        let (major, minor) = ctx
            .compute_capability()
            .map_err(cuda_err("compute capability"))?;
        let arch = format!("sm_{major}{minor}");
        // SAFETY: the engine synchronises explicitly (one stream, synchronous copies).
        unsafe { ctx.disable_event_tracking() };
        keep_pool_memory(&ctx);
        let stream = ctx.new_stream().map_err(cuda_err("new stream"))?;
        let dir = std::env::var_os("K2RPQ_KERNEL_DIR").map(PathBuf::from);
        let sources = KernelSources::read(dir.as_deref())?;
        let mut kernels = policy::file_kernels()?;
        let mut functions = HashMap::new();
        let cache = kernel_cache::folder();
        let code = sources.machine_code(&arch, cache.as_deref())?;
        let ms = |t: std::time::Instant| t.elapsed().as_secs_f64() * 1e3;
        log::debug!(
            "kernels for {arch}: {} of {} files from the cache, ready in {:.1} ms",
            code.iter().filter(|(_, c)| c.cached).count(),
            code.len(),
            ms(started)
        );
        let loading = std::time::Instant::now();
        for (name, Code { code, cached }) in code {
            let module = match ctx.load_module(Ptx::from_binary(code)) {
                Ok(m) => m,
                // An entry the driver refuses is rebuilt, never trusted twice.
                Err(_) if cached => {
                    let text = &sources
                        .files
                        .iter()
                        .find(|(n, _)| *n == name)
                        .expect("a file")
                        .1;
                    let code = sources.compile_file(name, text, &arch, Output::Cubin)?;
                    if let Some(d) = &cache {
                        let key = sources.cache_key(name, text, &arch, &nvrtc_version());
                        let _ = kernel_cache::write(d, &key, &code);
                    }
                    ctx.load_module(Ptx::from_binary(code))
                        .map_err(cuda_err("load module"))?
                }
                Err(e) => return Err(cuda_err("load module")(e)),
            };
            let at = kernels.iter().position(|(f, _)| *f == name);
            for (f, _) in at.map(|i| kernels.swap_remove(i).1).unwrap_or_default() {
                let func = module.load_function(f).map_err(cuda_err(f))?;
                functions.insert(f, func);
            }
        }
        log::debug!(
            "kernels loaded in {:.1} ms ({} functions)",
            ms(loading),
            functions.len()
        );
        Ok(GpuContext {
            ctx,
            stream,
            functions,
            compute_major: major,
        })
    }

    /// The CUDA context.
    pub(crate) fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// The stream all of the engine's work goes to.
    pub(crate) fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// Whether kernels may be launched to overlap their predecessor (programmatic
    /// dependent launch: compute capability 9.0 and later).
    pub(crate) fn supports_overlapped_launches(&self) -> bool {
        self.compute_major >= 9
    }

    /// A loaded kernel by name.
    pub(crate) fn function(&self, name: &str) -> Result<&CudaFunction> {
        self.functions
            .get(name)
            .ok_or_else(|| EngineError::Cuda(format!("kernel {name} not loaded")))
    }

    /// Allocates `n` zeroed elements (at least one, so every buffer has an address),
    /// naming `what` in the error if the device is out of memory.
    pub(crate) fn alloc_zeros<T: DeviceRepr + cudarc::driver::ValidAsZeroBits>(
        &self,
        n: usize,
        what: &str,
    ) -> Result<CudaSlice<T>> {
        let n = n.max(1);
        self.stream
            .alloc_zeros::<T>(n)
            .map_err(|e| alloc_err(e, (n * std::mem::size_of::<T>()) as u64, what))
    }

    /// Copies `host` to a new device buffer (at least one element).
    pub(crate) fn upload<T: DeviceRepr + cudarc::driver::ValidAsZeroBits + Copy>(
        &self,
        host: &[T],
        what: &str,
    ) -> Result<CudaSlice<T>> {
        if host.is_empty() {
            return self.alloc_zeros(1, what);
        }
        self.stream
            .clone_htod(host)
            .map_err(|e| alloc_err(e, std::mem::size_of_val(host) as u64, what))
    }
}

/// Maps an allocation failure to [`EngineError::OutOfMemory`] naming the bytes asked for.
pub(crate) fn alloc_err(e: DriverError, bytes: u64, what: &str) -> EngineError {
    use cudarc::driver::sys::CUresult;
    if e.0 == CUresult::CUDA_ERROR_OUT_OF_MEMORY {
        EngineError::OutOfMemory {
            bytes,
            what: what.to_string(),
        }
    } else {
        EngineError::Cuda(format!("allocating {bytes} bytes for {what}: {e:?}"))
    }
}

#[cfg(test)]
mod tests {
    /// The machine code of every file is compiled once, stored, and read back from the
    /// cache by the next process; a damaged entry is compiled again. Needs NVRTC (CI
    /// installs it), not a GPU.
    #[test]
    fn machine_code_is_cached_on_disk() {
        if !nvrtc_present() {
            assert!(
                std::env::var_os("K2RPQ_REQUIRE_NVRTC").is_none(),
                "K2RPQ_REQUIRE_NVRTC is set but libnvrtc cannot be loaded"
            );
            eprintln!("skipped: libnvrtc not found");
            return;
        }
        let dir = std::env::temp_dir().join(format!("k2rpq-kernels-{}", std::process::id()));
        let sources = KernelSources::read(None).unwrap();
        let first = sources.machine_code("sm_90", Some(&dir)).unwrap();
        assert!(first
            .iter()
            .all(|(_, c)| !c.cached && c.code.starts_with(b"\x7fELF")));
        let second = sources.machine_code("sm_90", Some(&dir)).unwrap();
        assert!(second.iter().all(|(_, c)| c.cached));
        for ((_, a), (_, b)) in first.iter().zip(&second) {
            assert_eq!(a.code, b.code);
        }
        // A damaged entry is a miss (another architecture is another key: see
        // `kernel_cache`'s tests).
        let entries: Vec<_> = std::fs::read_dir(&dir).unwrap().flatten().collect();
        assert_eq!(entries.len(), FILES.len());
        let victim = entries[0].path();
        let mut bytes = std::fs::read(&victim).unwrap();
        let at = bytes.len() / 2;
        bytes[at] ^= 0xff;
        std::fs::write(&victim, bytes).unwrap();
        let third = sources.machine_code("sm_90", Some(&dir)).unwrap();
        assert_eq!(third.iter().filter(|(_, c)| !c.cached).count(), 1);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    use super::*;

    /// Without a folder the built-in sources; with one, each file's text, and a missing
    /// file is an error naming it (no NVRTC needed: nothing is compiled).
    #[test]
    fn kernel_sources_come_from_the_folder_given() {
        let built_in = KernelSources::read(None).unwrap();
        assert_eq!(built_in.files.len(), FILES.len());
        assert_eq!(built_in.headers.len(), HEADERS.len());
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("include")).unwrap();
        for (name, _) in HEADERS {
            let path = match *name {
                "kernels.def" => dir.path().join(name),
                _ => dir.path().join("include").join(name),
            };
            std::fs::write(path, format!("// {name}")).unwrap();
        }
        for (name, _) in FILES {
            std::fs::write(dir.path().join(format!("{name}.cu")), format!("// {name}")).unwrap();
        }
        let read = KernelSources::read(Some(dir.path())).unwrap();
        for ((name, text), (want, _)) in read.headers.iter().zip(HEADERS) {
            assert_eq!(name, want);
            assert_eq!(text, &format!("// {name}"));
        }
        for ((name, text), (want, _)) in read.files.iter().zip(FILES) {
            assert_eq!(name, want);
            assert_eq!(text, &format!("// {name}"));
        }
        std::fs::remove_file(dir.path().join("scan.cu")).unwrap();
        let err = KernelSources::read(Some(dir.path()))
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("scan.cu"), "{err}");
        std::fs::remove_file(dir.path().join("include").join("tree.cuh")).unwrap();
        let err = KernelSources::read(Some(dir.path()))
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("tree.cuh"), "{err}");
    }

    /// The kernel files built in are those of the table, and the headers those under
    /// `cuda/include` (so a new file or header cannot be left out of the binary).
    #[test]
    fn built_in_sources_are_the_tables_and_the_folders() {
        let mut table: Vec<&str> = policy::file_kernels()
            .unwrap()
            .iter()
            .map(|(f, _)| *f)
            .collect();
        let mut files: Vec<&str> = FILES.iter().map(|(f, _)| *f).collect();
        table.sort_unstable();
        files.sort_unstable();
        assert_eq!(table, files);
        let cuda = Path::new(env!("CARGO_MANIFEST_DIR")).join("cuda");
        let listed = |dir: &Path, ext: &str| -> Vec<String> {
            let mut names: Vec<String> = std::fs::read_dir(dir)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .filter(|n| n.ends_with(ext))
                .collect();
            names.sort();
            names
        };
        let mut on_disk: Vec<String> = listed(&cuda, ".cu");
        on_disk.iter_mut().for_each(|n| n.truncate(n.len() - 3));
        assert_eq!(on_disk, files);
        let mut headers: Vec<&str> = HEADERS
            .iter()
            .map(|(h, _)| *h)
            .filter(|h| *h != "kernels.def")
            .collect();
        headers.sort_unstable();
        assert_eq!(listed(&cuda.join("include"), ".cuh"), headers);
    }
}
