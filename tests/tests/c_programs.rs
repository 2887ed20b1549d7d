//! One test per (C program, way, device count).
//!
//! Names are `<program>::<way>_<n>dev`, e.g. `buffers::preload_3dev`, so
//! `cargo test -p mirrorcl-tests native_` runs only the native (PoCL)
//! validation and `cargo test -p mirrorcl-tests -- buffers::` one program.
//!
//! Native runs check the programs themselves against PoCL 3.1.  Known PoCL
//! deviations from OpenCL 1.2 are only checked strictly under MirrorCL
//! (`CHECK_NATIVE_DEVIATES` and `ct_mirrorcl()` guards in the C sources):
//! * clGetDeviceIDs / clCreateContextFromType with an invalid device type
//!   return CL_DEVICE_NOT_FOUND instead of CL_INVALID_DEVICE_TYPE, and
//!   clCreateContextFromType returns a non-NULL context on that error;
//! * clEnqueueMapBuffer accepts invalid map flags (READ|WRITE_INVALIDATE);
//! * CL_PROGRAM_BINARY_SIZES / BINARIES / CL_PROGRAM_BUILD_LOG of an unbuilt
//!   program return CL_INVALID_PROGRAM;
//! * clCreateProgramWithSource(strings NULL), clCreateProgramWithBinary
//!   (binaries NULL), clEnqueueNDRangeKernel / clEnqueueTask with a NULL
//!   kernel, a NULL global size or an invalid wait list crash;
//! * clSetKernelArg does not validate memory objects;
//! * a zero global size, zero-size read/write are accepted;
//! * clEnqueueNDRangeKernel does not validate its event wait list;
//! * clEnqueueTask events have type CL_COMMAND_NDRANGE_KERNEL;
//! * unknown clCreateCommandQueue property bits are accepted;
//! * clEnqueueWaitForEvents is unimplemented (aborts the process);
//! * CL_CONTEXT_INTEROP_USER_SYNC accepts any value, not only CL_TRUE/CL_FALSE;
//! * clCreateSubDevices EQUALLY by all the compute units creates one sub-device
//!   (CL_DEVICE_PARTITION_FAILED expected), by more returns CL_INVALID_VALUE
//!   (CL_INVALID_DEVICE_PARTITION_COUNT expected);
//! * CL_COMPLETE callbacks of commands terminated by a failed user event are
//!   never called.
//!
//! Every native run of every program passes; the suite includes them all.

use mirrorcl_tests::{check_program, check_program_with, Way};

macro_rules! c_program {
    ($prog:ident) => {
        mod $prog {
            use super::*;

            #[test]
            fn native_1dev() {
                check_program(stringify!($prog), Way::Native, 1);
            }
            #[test]
            fn native_3dev() {
                check_program(stringify!($prog), Way::Native, 3);
            }
            #[test]
            fn preload_1dev() {
                check_program(stringify!($prog), Way::Preload, 1);
            }
            #[test]
            fn preload_3dev() {
                check_program(stringify!($prog), Way::Preload, 3);
            }
            #[test]
            fn loader_1dev() {
                check_program(stringify!($prog), Way::Loader, 1);
            }
            #[test]
            fn loader_3dev() {
                check_program(stringify!($prog), Way::Loader, 3);
            }
            #[test]
            fn direct_1dev() {
                check_program(stringify!($prog), Way::Direct, 1);
            }
            #[test]
            fn direct_3dev() {
                check_program(stringify!($prog), Way::Direct, 3);
            }
            /// One vendor context per device: every transfer between devices goes
            /// through the host copy, the path data takes between two vendors.
            #[test]
            fn preload_3dev_separate_contexts() {
                check_program_with(
                    stringify!($prog),
                    Way::Preload,
                    3,
                    &[("MIRRORCL_CONTEXT_PER_DEVICE", "1")],
                );
            }
            /// The application thread issues only the commands it would wait for
            /// itself, as for a GPU (`MIRRORCL_CALLER_ISSUES=waited`; "auto" has it issue
            /// every command that does not block on these CPU devices).
            #[test]
            fn preload_3dev_caller_issues() {
                check_program_with(
                    stringify!($prog),
                    Way::Preload,
                    3,
                    &[("MIRRORCL_CALLER_ISSUES", "waited")],
                );
            }
        }
    };
}

c_program!(vecadd_multi);
c_program!(platform_device);
c_program!(context);
c_program!(buffers);
c_program!(program_kernel);
c_program!(events);
c_program!(errors);
c_program!(pingpong);
c_program!(vendor_fidelity);
c_program!(lifetimes);
c_program!(images);
// Host threads of one process (one rank: threads on several ranks are not supported).
c_program!(threads_one_process);
c_program!(memory_bounded);
c_program!(wait_paths);
// Enqueues from an event callback: in one process only (on several ranks a callback
// runs at a different point of the program on each, so the ranks would plan apart).
c_program!(callback_enqueues);

/// A command that fails right after a kernel launched without a vendor event (as for
/// GPUs; `MIRRORCL_INJECT_FAILURE` fails its vendor call): the kernel still completes, and
/// every later round of `wait_paths` passes. Round 2's second kernel was to back the
/// first by its own event; round 1's blocking read, by its return.
#[test]
fn wait_paths_when_the_backing_command_fails() {
    for (fail, command) in [("follow", "6:-5"), ("return", "4:-5")] {
        check_program_with(
            "wait_paths",
            Way::Preload,
            3,
            &[
                ("MIRRORCL_CALLER_ISSUES", "waited"),
                ("MIRRORCL_HOLD_ALL", "1"),
                ("MIRRORCL_INJECT_FAILURE", command),
                ("WAIT_PATHS_FAIL", fail),
            ],
        );
    }
}

/// The suite covers every program listed in the library.
#[test]
fn all_programs_have_tests() {
    let covered = [
        "vecadd_multi",
        "platform_device",
        "context",
        "buffers",
        "program_kernel",
        "events",
        "errors",
        "pingpong",
        "vendor_fidelity",
        "lifetimes",
        "images",
        "threads_one_process",
        "memory_bounded",
        "wait_paths",
        "callback_enqueues",
    ];
    assert_eq!(mirrorcl_tests::PROGRAMS, covered);
}

/// A configuration file (`MIRRORCL_CONFIG`, as in `cluster-configs/`) selects the
/// devices: at most 2 of the 3 PoCL devices here.
#[test]
fn config_file_selects_devices() {
    let dir = mirrorcl_tests::target_dir().join("ctests");
    std::fs::create_dir_all(&dir).expect("ctests directory");
    let path = dir.join("max-two-cpus.toml");
    std::fs::write(
        &path,
        "[devices]\nplatforms = [\"Portable Computing Language\"]\ntypes = [\"cpu\"]\nmax_devices = 2\n",
    )
    .expect("write the configuration");
    let path = path.to_str().expect("UTF-8 path");
    check_program_with(
        "vecadd_multi",
        Way::Preload,
        3,
        &[("MIRRORCL_CONFIG", path), ("CTEST_EXPECT_DEVICES", "2")],
    );
}
