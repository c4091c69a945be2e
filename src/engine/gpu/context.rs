//! The CUDA context of the GPU engine: driver and NVRTC presence checks, run-time
//! compilation of the kernels in `cuda/` for the device's architecture, and the loaded
//! functions.

use std::borrow::Cow;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaFunction, CudaSlice, CudaStream, DeviceRepr, DriverError};
use cudarc::nvrtc::{compile_ptx_with_opts, CompileError, CompileOptions, Ptx};

use crate::engine::{EngineError, Result};

/// Text every kernel file is compiled with (types, the step parameters, tree helpers).
const COMMON: &str = include_str!("../../../cuda/common.cuh");

/// The kernel sources, by module name; each is compiled with `COMMON` prepended.
pub const KERNEL_SOURCES: &[(&str, &str)] = &[
    ("traverse", include_str!("../../../cuda/traverse.cu")),
    ("scan", include_str!("../../../cuda/scan.cu")),
    ("bits", include_str!("../../../cuda/bits.cu")),
    ("leaves", include_str!("../../../cuda/leaves.cu")),
    ("windows", include_str!("../../../cuda/windows.cu")),
];

/// The kernels the engine launches, by module.
const FUNCTIONS: &[(&str, &[&str])] = &[
    (
        "traverse",
        &[
            "expand",
            "expand_levels",
            "leaves_plus_times",
            "leaves_counting",
            "leaves_boolean",
            "leaves_tropical",
            "leaves_bits",
        ],
    ),
    ("scan", &["scan_fanout"]),
    (
        "bits",
        &[
            "bits_or",
            "bits_advance",
            "fill_u32",
            "pyramid_base",
            "pyramid_up",
        ],
    ),
    ("leaves", super::launch::LEAF_VARIANT_KERNELS),
    (
        "windows",
        &["rowwindows_bits", "rowgroups_bits", "clear_block_rows"],
    ),
];

/// Whether libcuda can be loaded. cudarc panics on its first call when it cannot, so
/// this is checked before anything else.
pub fn driver_present() -> bool {
    // SAFETY: only tries to dlopen the library by its usual names.
    unsafe { cudarc::driver::sys::is_culib_present() }
}

/// Whether libnvrtc can be loaded (same reason as [`driver_present`]).
pub fn nvrtc_present() -> bool {
    // SAFETY: only tries to dlopen the library by its usual names.
    unsafe { cudarc::nvrtc::sys::is_culib_present() }
}

/// Compiles every kernel module for `arch` (e.g. `sm_90`) with NVRTC: `(module, PTX)`.
///
/// Needs libnvrtc but no GPU, so CI checks that every kernel compiles. Call
/// [`nvrtc_present`] first: cudarc panics without the library.
///
/// With the environment variable `K2RPQ_KERNEL_DIR` set, the sources are read from that
/// folder instead of the ones built into the binary (see [`kernel_sources`]): a kernel can
/// then be changed and measured on a device without rebuilding, as long as its name and
/// parameters stay the same.
pub fn compile_kernels(arch: &str) -> Result<Vec<(&'static str, Ptx)>> {
    let dir = std::env::var_os("K2RPQ_KERNEL_DIR").map(PathBuf::from);
    let sources = kernel_sources(dir.as_deref())?;
    sources
        .modules
        .iter()
        .map(|&(name, _)| Ok((name, compile_module(&sources, name, arch)?)))
        .collect()
}

/// Compiles module `name` of `sources` for `arch` as the engine does: the common header
/// prepended, line numbers of the module's own file in messages.
pub fn compile_module(sources: &KernelSources, name: &str, arch: &str) -> Result<Ptx> {
    let src = sources
        .modules
        .iter()
        .find(|(m, _)| *m == name)
        .map(|(_, text)| text)
        .ok_or_else(|| EngineError::Cuda(format!("no kernel module {name}")))?;
    let text = format!("{}\n#line 1 \"{name}.cu\"\n{src}", sources.common);
    let opts = CompileOptions {
        options: vec![format!("--gpu-architecture={arch}"), "-std=c++17".into()],
        name: Some(format!("{name}.cu")),
        ..Default::default()
    };
    compile_ptx_with_opts(text, opts)
        .map_err(|e| EngineError::Cuda(format!("NVRTC {name}.cu: {}", compile_log(&e))))
}

/// The text of the kernel sources: the common header's, and each module's by name.
pub struct KernelSources {
    /// `common.cuh`, prepended to every module.
    pub common: Cow<'static, str>,
    /// `(module, text)` in the order of [`KERNEL_SOURCES`].
    pub modules: Vec<(&'static str, Cow<'static, str>)>,
}

/// The kernel sources as built into the binary, or with `dir` read from `dir/common.cuh`
/// and `dir/<module>.cu` (a copy of `cuda/`). Every file is read before anything is
/// compiled, so a missing one is reported by its path.
pub fn kernel_sources(dir: Option<&Path>) -> Result<KernelSources> {
    let read = |file: &str, built_in: &'static str| -> Result<Cow<'static, str>> {
        let Some(d) = dir else {
            return Ok(built_in.into());
        };
        let path = d.join(file);
        std::fs::read_to_string(&path)
            .map(Into::into)
            .map_err(|e| EngineError::Cuda(format!("kernel source {}: {e}", path.display())))
    };
    let common = read("common.cuh", COMMON)?;
    let modules = KERNEL_SOURCES
        .iter()
        .map(|&(name, built_in)| Ok((name, read(&format!("{name}.cu"), built_in)?)))
        .collect::<Result<_>>()?;
    Ok(KernelSources { common, modules })
}

fn compile_log(e: &CompileError) -> String {
    match e {
        CompileError::CompileError { log, .. } => log.to_string_lossy().into_owned(),
        other => format!("{other:?}"),
    }
}

/// Converts a driver error into the engine's error.
pub(crate) fn cuda_err(what: &str) -> impl FnOnce(DriverError) -> EngineError + '_ {
    move |e| EngineError::Cuda(format!("{what}: {e:?}"))
}

/// Freed stream-ordered memory the device's default pool keeps mapped across
/// synchronisations. The driver's default, 0, unmaps every freed block at the next
/// synchronisation, so each query mapped its bit batches and product scratch afresh
/// (~2 ms of a 1-row `<c> p+ ?y` on cnr-2000 with every product on the H200).
pub const POOL_KEEP_BYTES: u64 = 1 << 30;

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
pub struct GpuContext {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    functions: HashMap<&'static str, CudaFunction>,
    arch: String,
    compute_major: i32,
}

impl GpuContext {
    /// Opens device `ordinal`, compiles the kernels for its compute capability and loads
    /// them. Event tracking is turned off for the context: the engine orders all its work
    /// on one stream, and CUDA graph capture requires it off.
    pub fn new(ordinal: usize) -> Result<Self> {
        let ctx = CudaContext::new(ordinal)
            .map_err(|e| EngineError::Unavailable(format!("device {ordinal}: {e:?}")))?;
        let (major, minor) = ctx
            .compute_capability()
            .map_err(cuda_err("compute capability"))?;
        let arch = format!("sm_{major}{minor}");
        // SAFETY: the engine synchronises explicitly (one stream, synchronous copies).
        unsafe { ctx.disable_event_tracking() };
        keep_pool_memory(&ctx);
        let stream = ctx.new_stream().map_err(cuda_err("new stream"))?;
        let mut functions = HashMap::new();
        for (name, ptx) in compile_kernels(&arch)? {
            let module = ctx.load_module(ptx).map_err(cuda_err("load module"))?;
            let names = FUNCTIONS
                .iter()
                .find(|(m, _)| *m == name)
                .map(|(_, f)| *f)
                .unwrap_or(&[]);
            for &f in names {
                let func = module.load_function(f).map_err(cuda_err(f))?;
                functions.insert(f, func);
            }
        }
        Ok(GpuContext {
            ctx,
            stream,
            functions,
            arch,
            compute_major: major,
        })
    }

    /// The CUDA context.
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// The stream all of the engine's work goes to.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// The architecture the kernels were compiled for (`sm_90` on an H100/H200).
    pub fn arch(&self) -> &str {
        &self.arch
    }

    /// Whether kernels may be launched to overlap their predecessor (programmatic
    /// dependent launch: compute capability 9.0 and later).
    pub fn supports_overlapped_launches(&self) -> bool {
        self.compute_major >= 9
    }

    /// A loaded kernel by name.
    pub fn function(&self, name: &str) -> Result<&CudaFunction> {
        self.functions
            .get(name)
            .ok_or_else(|| EngineError::Cuda(format!("kernel {name} not loaded")))
    }

    /// Allocates `n` zeroed elements (at least one, so every buffer has an address),
    /// naming `what` in the error if the device is out of memory.
    pub fn alloc_zeros<T: DeviceRepr + cudarc::driver::ValidAsZeroBits>(
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
    pub fn upload<T: DeviceRepr + cudarc::driver::ValidAsZeroBits + Copy>(
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
    use super::*;

    /// Without a folder the built-in sources; with one, each file's text, and a missing
    /// file is an error naming it (no NVRTC needed: nothing is compiled).
    #[test]
    fn kernel_sources_come_from_the_folder_given() {
        let built_in = kernel_sources(None).unwrap();
        assert_eq!(built_in.common, COMMON);
        assert_eq!(built_in.modules.len(), KERNEL_SOURCES.len());
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("common.cuh"), "// common").unwrap();
        for (name, _) in KERNEL_SOURCES {
            std::fs::write(dir.path().join(format!("{name}.cu")), format!("// {name}")).unwrap();
        }
        let read = kernel_sources(Some(dir.path())).unwrap();
        assert_eq!(read.common, "// common");
        for ((name, text), (want, _)) in read.modules.iter().zip(KERNEL_SOURCES) {
            assert_eq!(name, want);
            assert_eq!(text, &format!("// {name}"));
        }
        std::fs::remove_file(dir.path().join("scan.cu")).unwrap();
        let err = kernel_sources(Some(dir.path())).err().unwrap().to_string();
        assert!(err.contains("scan.cu"), "{err}");
    }
}
