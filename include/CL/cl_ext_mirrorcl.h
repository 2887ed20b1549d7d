/*
 * cl_ext_mirrorcl.h - MirrorCL's OpenCL extension: cl_mirrorcl_attach_buffer.
 *
 * clAttachBufferToDevice(buffer, device) declares that `device` always holds the
 * newest bytes of `buffer` (SnuCL-D, Section IV.5). MirrorCL first makes that
 * device's copy current (identically on every rank), then stops tracking where the
 * buffer's bytes are valid: a command on another device that reads the buffer gets
 * the bytes from `device`, one that writes it sends them back to `device`. Together
 * with the queueing optimisation, commands of other ranks' devices whose buffers are
 * all attached to other ranks' devices are not even enqueued on this rank.
 *
 * Returns CL_SUCCESS, CL_INVALID_MEM_OBJECT (not a buffer, or a sub-buffer) or
 * CL_INVALID_DEVICE (not a device of the buffer's context). The thesis declares it
 * void; programs written against that prototype keep working.
 *
 * Available when the platform lists "cl_mirrorcl_attach_buffer" in
 * CL_PLATFORM_EXTENSIONS; get it portably with
 *   clGetExtensionFunctionAddressForPlatform(platform, "clAttachBufferToDevice")
 * (also under the platform's suffix: "clAttachBufferToDeviceMCL"), or link to
 * libmirrorcl.so, which exports it.
 */
#ifndef CL_EXT_MIRRORCL_H
#define CL_EXT_MIRRORCL_H

#include <CL/cl.h>

#ifdef __cplusplus
extern "C" {
#endif

#define cl_mirrorcl_attach_buffer 1
#define CL_MIRRORCL_ATTACH_BUFFER_EXTENSION_NAME "cl_mirrorcl_attach_buffer"

typedef cl_int (CL_API_CALL *clAttachBufferToDevice_fn)(cl_mem buffer, cl_device_id device);

extern CL_API_ENTRY cl_int CL_API_CALL clAttachBufferToDevice(cl_mem buffer, cl_device_id device);

#ifdef __cplusplus
}
#endif

#endif /* CL_EXT_MIRRORCL_H */
