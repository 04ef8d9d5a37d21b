"""True-VSYNC presentation through a Vulkan FIFO swapchain (the `vulkan` package, cffi).

A frame goes: numpy RGBA -> memmove into a host-visible staging buffer -> (GPU) copy into an
R8G8B8A8 upload image -> blit (format conversion + scaling) onto the acquired swapchain image
-> vkQueuePresentKHR in FIFO mode. Command buffers are recorded once per (slot, swapchain image)
at setup, so a present costs the memmove plus a handful of API calls on the calling thread.

The surface is made for an X11 window (VK_KHR_xcb_surface) from the window id and the xcb
connection of the Qt application (`for_qwindow`). Present timestamps: VK_GOOGLE_display_timing
and VK_KHR_present_wait are detected and reported in `timing`; when neither exists (lavapipe)
`last_present_ns` is the time vkQueuePresentKHR returned (queued, not scanned out).

`readback=True` additionally copies each presented swapchain image into a host buffer
(`read_last()`), for tests and screenshots.
"""

from __future__ import annotations

import contextlib
import time

import numpy as np
import vulkan as vk

from app.present.base import PresenterError, refresh_ns_from_hz

_SLOTS = 2  # frames in flight, each with its own staging buffer and upload image
_NO_TIMEOUT = 0xFFFFFFFFFFFFFFFF


def _subresource_range():
    return vk.VkImageSubresourceRange(
        aspectMask=vk.VK_IMAGE_ASPECT_COLOR_BIT,
        baseMipLevel=0,
        levelCount=1,
        baseArrayLayer=0,
        layerCount=1,
    )


def _layers():
    return vk.VkImageSubresourceLayers(
        aspectMask=vk.VK_IMAGE_ASPECT_COLOR_BIT, mipLevel=0, baseArrayLayer=0, layerCount=1
    )


def _whole_image_copy(width: int, height: int):
    """A buffer<->image copy region covering a whole, tightly packed width x height image."""
    return vk.VkBufferImageCopy(
        bufferOffset=0,
        bufferRowLength=0,
        bufferImageHeight=0,
        imageSubresource=_layers(),
        imageOffset=vk.VkOffset3D(x=0, y=0, z=0),
        imageExtent=vk.VkExtent3D(width=width, height=height, depth=1),
    )


class VulkanPresenter:
    def __init__(
        self,
        xcb_connection: int,
        window_id: int,
        frame_size: tuple[int, int],
        *,
        refresh_hz: float = 60.0,
        readback: bool = False,
        present_mode: str = "fifo",
    ):
        """`frame_size` is (width, height) of the frames `present` will get."""
        self.frame_w, self.frame_h = frame_size
        self.refresh_ns = refresh_ns_from_hz(refresh_hz)
        self.readback = readback
        self._want_mode = {
            "fifo": vk.VK_PRESENT_MODE_FIFO_KHR,
            "mailbox": vk.VK_PRESENT_MODE_MAILBOX_KHR,
            "immediate": vk.VK_PRESENT_MODE_IMMEDIATE_KHR,
        }[present_mode]
        self._conn = xcb_connection
        self._window = window_id
        self._last_present: int | None = None
        self._slot = 0
        self.presented = 0
        self.skipped = 0  # presents that got no swapchain image (see present)
        self._last_image: int | None = None
        self._destroyers: list = []  # device-level cleanup, run in reverse
        self.instance = self.device = self.surface = self.swapchain = None
        try:
            self._create_instance_and_surface()
            self._pick_device()
            self._create_device()
            self._create_frame_resources()
            self._create_swapchain()
        except PresenterError:
            self.close()
            raise
        except Exception as exc:  # vulkan raises many types; the UI wants one reason
            self.close()
            raise PresenterError(f"Vulkan setup failed: {type(exc).__name__}: {exc}") from exc

    @classmethod
    def for_qwindow(cls, window, frame_size: tuple[int, int], **kw) -> VulkanPresenter:
        """A presenter for a shown QWindow on the xcb platform."""
        from PySide6.QtGui import QGuiApplication

        app = QGuiApplication.instance()
        if app is None or app.platformName() != "xcb":
            name = None if app is None else app.platformName()
            raise PresenterError(f"the Vulkan path needs the xcb (X11) Qt platform, not {name!r}")
        native = app.nativeInterface()
        conn = native.connection() if native is not None and hasattr(native, "connection") else 0
        if not conn:
            raise PresenterError("no xcb connection from Qt's native interface")
        screen = window.screen()
        kw.setdefault("refresh_hz", screen.refreshRate() if screen is not None else 60.0)
        return cls(conn, int(window.winId()), frame_size, **kw)

    # -- setup -----------------------------------------------------------------------------

    def _create_instance_and_surface(self) -> None:
        available = {e.extensionName for e in vk.vkEnumerateInstanceExtensionProperties(None)}
        need = ["VK_KHR_surface", "VK_KHR_xcb_surface"]
        missing = [e for e in need if e not in available]
        if missing:
            raise PresenterError(f"Vulkan instance lacks {', '.join(missing)}")
        app_info = vk.VkApplicationInfo(
            pApplicationName="kagura",
            applicationVersion=1,
            pEngineName="kagura",
            engineVersion=1,
            apiVersion=vk.VK_MAKE_VERSION(1, 1, 0),
        )
        self.instance = vk.vkCreateInstance(
            vk.VkInstanceCreateInfo(pApplicationInfo=app_info, ppEnabledExtensionNames=need), None
        )
        self._vkCreateXcbSurfaceKHR = vk.vkGetInstanceProcAddr(
            self.instance, "vkCreateXcbSurfaceKHR"
        )
        self._vkDestroySurfaceKHR = vk.vkGetInstanceProcAddr(self.instance, "vkDestroySurfaceKHR")
        self._vkSurfaceSupport = vk.vkGetInstanceProcAddr(
            self.instance, "vkGetPhysicalDeviceSurfaceSupportKHR"
        )
        self._vkSurfaceCaps = vk.vkGetInstanceProcAddr(
            self.instance, "vkGetPhysicalDeviceSurfaceCapabilitiesKHR"
        )
        self._vkSurfaceFormats = vk.vkGetInstanceProcAddr(
            self.instance, "vkGetPhysicalDeviceSurfaceFormatsKHR"
        )
        self._vkSurfaceModes = vk.vkGetInstanceProcAddr(
            self.instance, "vkGetPhysicalDeviceSurfacePresentModesKHR"
        )
        info = vk.VkXcbSurfaceCreateInfoKHR(
            flags=0, connection=vk.ffi.cast("xcb_connection_t*", self._conn), window=self._window
        )
        self.surface = self._vkCreateXcbSurfaceKHR(self.instance, info, None)

    def _pick_device(self) -> None:
        devices = vk.vkEnumeratePhysicalDevices(self.instance)
        if not devices:
            raise PresenterError("Vulkan reports no physical device")
        rank = {
            vk.VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: 0,
            vk.VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: 1,
            vk.VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: 2,
            vk.VK_PHYSICAL_DEVICE_TYPE_CPU: 3,
        }
        best = None
        for dev in devices:
            props = vk.vkGetPhysicalDeviceProperties(dev)
            exts = {e.extensionName for e in vk.vkEnumerateDeviceExtensionProperties(dev, None)}
            if "VK_KHR_swapchain" not in exts:
                continue
            for qi, fam in enumerate(vk.vkGetPhysicalDeviceQueueFamilyProperties(dev)):
                if not fam.queueFlags & (vk.VK_QUEUE_GRAPHICS_BIT | vk.VK_QUEUE_TRANSFER_BIT):
                    continue
                if not self._vkSurfaceSupport(dev, qi, self.surface):
                    continue
                cand = (rank.get(props.deviceType, 4), dev, qi, props, exts)
                if best is None or cand[0] < best[0]:
                    best = cand
                break
        if best is None:
            raise PresenterError("no Vulkan device can present to this window")
        _, self.physical, self.queue_family, props, self.device_extensions = best
        self.is_cpu_device = props.deviceType == vk.VK_PHYSICAL_DEVICE_TYPE_CPU
        self.device_name = (
            vk.ffi.string(props.deviceName).decode()
            if not isinstance(props.deviceName, str)
            else props.deviceName
        )
        self._mem_props = vk.vkGetPhysicalDeviceMemoryProperties(self.physical)

    def _create_device(self) -> None:
        exts = ["VK_KHR_swapchain"]
        self.has_display_timing = "VK_GOOGLE_display_timing" in self.device_extensions
        self.has_present_wait = {
            "VK_KHR_present_id",
            "VK_KHR_present_wait",
        } <= self.device_extensions
        queue_info = vk.VkDeviceQueueCreateInfo(
            queueFamilyIndex=self.queue_family, queueCount=1, pQueuePriorities=[1.0]
        )
        self.device = vk.vkCreateDevice(
            self.physical,
            vk.VkDeviceCreateInfo(pQueueCreateInfos=[queue_info], ppEnabledExtensionNames=exts),
            None,
        )
        self.queue = vk.vkGetDeviceQueue(self.device, self.queue_family, 0)
        d = self.device
        self._vkCreateSwapchainKHR = vk.vkGetDeviceProcAddr(d, "vkCreateSwapchainKHR")
        self._vkDestroySwapchainKHR = vk.vkGetDeviceProcAddr(d, "vkDestroySwapchainKHR")
        self._vkGetSwapchainImagesKHR = vk.vkGetDeviceProcAddr(d, "vkGetSwapchainImagesKHR")
        self._vkAcquireNextImageKHR = vk.vkGetDeviceProcAddr(d, "vkAcquireNextImageKHR")
        self._vkQueuePresentKHR = vk.vkGetDeviceProcAddr(d, "vkQueuePresentKHR")
        if self.has_display_timing:
            self.timing = (
                "VK_GOOGLE_display_timing is available but not used yet: times are when "
                "vkQueuePresentKHR returned"
            )
        elif self.has_present_wait:
            self.timing = (
                "VK_KHR_present_wait is available but not used yet: times are when "
                "vkQueuePresentKHR returned"
            )
        else:
            self.timing = (
                f"{self.device_name} has neither VK_GOOGLE_display_timing nor VK_KHR_present_wait: "
                "times are when vkQueuePresentKHR returned (queued, not scanned out)"
            )

    def _memory_type(self, type_bits: int, flags: int) -> int:
        for i in range(self._mem_props.memoryTypeCount):
            if (
                type_bits & (1 << i)
                and (self._mem_props.memoryTypes[i].propertyFlags & flags) == flags
            ):
                return i
        raise PresenterError(f"no Vulkan memory type with flags {flags:#x}")

    def _buffer(self, size: int, usage: int):
        d = self.device
        buf = vk.vkCreateBuffer(
            d,
            vk.VkBufferCreateInfo(size=size, usage=usage, sharingMode=vk.VK_SHARING_MODE_EXCLUSIVE),
            None,
        )
        req = vk.vkGetBufferMemoryRequirements(d, buf)
        host = vk.VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | vk.VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
        mem = vk.vkAllocateMemory(
            d,
            vk.VkMemoryAllocateInfo(
                allocationSize=req.size, memoryTypeIndex=self._memory_type(req.memoryTypeBits, host)
            ),
            None,
        )
        vk.vkBindBufferMemory(d, buf, mem, 0)
        mapped = vk.vkMapMemory(d, mem, 0, size, 0)
        self._destroyers.append(
            lambda: (vk.vkDestroyBuffer(d, buf, None), vk.vkFreeMemory(d, mem, None))
        )
        return buf, mapped

    def _create_frame_resources(self) -> None:
        d = self.device
        w, h = self.frame_w, self.frame_h
        self.pool = vk.vkCreateCommandPool(
            d,
            vk.VkCommandPoolCreateInfo(
                queueFamilyIndex=self.queue_family,
                flags=vk.VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
            ),
            None,
        )
        self._destroyers.append(lambda: vk.vkDestroyCommandPool(d, self.pool, None))
        self.staging, self.staging_ptr, self.upload, self.fences = [], [], [], []
        self.acquired, self.rendered = [], []
        for _ in range(_SLOTS):
            buf, mapped = self._buffer(w * h * 4, vk.VK_BUFFER_USAGE_TRANSFER_SRC_BIT)
            self.staging.append(buf)
            self.staging_ptr.append(vk.ffi.from_buffer(mapped))
            img = vk.vkCreateImage(
                d,
                vk.VkImageCreateInfo(
                    imageType=vk.VK_IMAGE_TYPE_2D,
                    format=vk.VK_FORMAT_R8G8B8A8_UNORM,
                    extent=vk.VkExtent3D(width=w, height=h, depth=1),
                    mipLevels=1,
                    arrayLayers=1,
                    samples=vk.VK_SAMPLE_COUNT_1_BIT,
                    tiling=vk.VK_IMAGE_TILING_OPTIMAL,
                    usage=vk.VK_IMAGE_USAGE_TRANSFER_DST_BIT | vk.VK_IMAGE_USAGE_TRANSFER_SRC_BIT,
                    sharingMode=vk.VK_SHARING_MODE_EXCLUSIVE,
                    initialLayout=vk.VK_IMAGE_LAYOUT_UNDEFINED,
                ),
                None,
            )
            req = vk.vkGetImageMemoryRequirements(d, img)
            mem = vk.vkAllocateMemory(
                d,
                vk.VkMemoryAllocateInfo(
                    allocationSize=req.size,
                    memoryTypeIndex=self._memory_type(
                        req.memoryTypeBits, vk.VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT
                    ),
                ),
                None,
            )
            vk.vkBindImageMemory(d, img, mem, 0)
            self._destroyers.append(
                lambda img=img, mem=mem: (
                    vk.vkDestroyImage(d, img, None),
                    vk.vkFreeMemory(d, mem, None),
                )
            )
            self.upload.append(img)
            fence = vk.vkCreateFence(
                d, vk.VkFenceCreateInfo(flags=vk.VK_FENCE_CREATE_SIGNALED_BIT), None
            )
            sem_a = vk.vkCreateSemaphore(d, vk.VkSemaphoreCreateInfo(), None)
            sem_r = vk.vkCreateSemaphore(d, vk.VkSemaphoreCreateInfo(), None)
            self._destroyers.append(
                lambda f=fence, a=sem_a, r=sem_r: (
                    vk.vkDestroyFence(d, f, None),
                    vk.vkDestroySemaphore(d, a, None),
                    vk.vkDestroySemaphore(d, r, None),
                )
            )
            self.fences.append(fence)
            self.acquired.append(sem_a)
            self.rendered.append(sem_r)

    def _create_swapchain(self) -> None:
        d = self.device
        caps = self._vkSurfaceCaps(self.physical, self.surface)
        formats = self._vkSurfaceFormats(self.physical, self.surface)
        modes = list(self._vkSurfaceModes(self.physical, self.surface))
        if self._want_mode not in modes:
            raise PresenterError(f"present mode {self._want_mode} not offered (offered: {modes})")
        self.present_mode = self._want_mode
        usage = vk.VK_IMAGE_USAGE_TRANSFER_DST_BIT
        if not caps.supportedUsageFlags & usage:
            raise PresenterError("swapchain images cannot be transfer destinations on this surface")
        if self.readback:
            if not caps.supportedUsageFlags & vk.VK_IMAGE_USAGE_TRANSFER_SRC_BIT:
                raise PresenterError(
                    "readback asked for but swapchain images cannot be copied from"
                )
            usage |= vk.VK_IMAGE_USAGE_TRANSFER_SRC_BIT
        unorm = [
            f
            for f in formats
            if f.format in (vk.VK_FORMAT_B8G8R8A8_UNORM, vk.VK_FORMAT_R8G8B8A8_UNORM)
        ]
        if not unorm:
            raise PresenterError("no 8-bit UNORM swapchain format (frames are sRGB-encoded bytes)")
        fmt = unorm[0]
        self.swap_format = fmt.format
        if caps.currentExtent.width == 0xFFFFFFFF:
            extent = vk.VkExtent2D(width=self.frame_w, height=self.frame_h)
        else:
            extent = caps.currentExtent
        self.extent = (extent.width, extent.height)
        if caps.supportedCompositeAlpha & vk.VK_COMPOSITE_ALPHA_PRE_MULTIPLIED_BIT_KHR:
            alpha, self.transparent = vk.VK_COMPOSITE_ALPHA_PRE_MULTIPLIED_BIT_KHR, True
        elif caps.supportedCompositeAlpha & vk.VK_COMPOSITE_ALPHA_OPAQUE_BIT_KHR:
            alpha, self.transparent = vk.VK_COMPOSITE_ALPHA_OPAQUE_BIT_KHR, False
        else:
            alpha, self.transparent = vk.VK_COMPOSITE_ALPHA_INHERIT_BIT_KHR, False
        count = max(caps.minImageCount, 2)
        if caps.maxImageCount:
            count = min(count, caps.maxImageCount)
        self.swapchain = self._vkCreateSwapchainKHR(
            d,
            vk.VkSwapchainCreateInfoKHR(
                surface=self.surface,
                minImageCount=count,
                imageFormat=fmt.format,
                imageColorSpace=fmt.colorSpace,
                imageExtent=extent,
                imageArrayLayers=1,
                imageUsage=usage,
                imageSharingMode=vk.VK_SHARING_MODE_EXCLUSIVE,
                preTransform=caps.currentTransform,
                compositeAlpha=alpha,
                presentMode=self.present_mode,
                clipped=vk.VK_TRUE,
                oldSwapchain=vk.VK_NULL_HANDLE,
            ),
            None,
        )
        self.images = list(self._vkGetSwapchainImagesKHR(d, self.swapchain))
        if self.readback:
            ew, eh = self.extent
            self.readback_buf, self.readback_map = self._buffer(
                ew * eh * 4, vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT
            )
        self._record_commands()
        mode = {vk.VK_PRESENT_MODE_FIFO_KHR: "FIFO", vk.VK_PRESENT_MODE_MAILBOX_KHR: "MAILBOX"}.get(
            self.present_mode, "IMMEDIATE"
        )
        self.name = f"vulkan ({self.device_name}, {mode}, {len(self.images)} images, {self.extent[0]}x{self.extent[1]})"

    def _barrier(self, cb, image, old, new, src_access, dst_access, src_stage, dst_stage) -> None:
        b = vk.VkImageMemoryBarrier(
            srcAccessMask=src_access,
            dstAccessMask=dst_access,
            oldLayout=old,
            newLayout=new,
            srcQueueFamilyIndex=vk.VK_QUEUE_FAMILY_IGNORED,
            dstQueueFamilyIndex=vk.VK_QUEUE_FAMILY_IGNORED,
            image=image,
            subresourceRange=_subresource_range(),
        )
        vk.vkCmdPipelineBarrier(cb, src_stage, dst_stage, 0, 0, None, 0, None, 1, [b])

    def _record_commands(self) -> None:
        """One command buffer per (slot, swapchain image); the data changes, the commands do not."""
        d = self.device
        n = _SLOTS * len(self.images)
        self.cmds = vk.vkAllocateCommandBuffers(
            d,
            vk.VkCommandBufferAllocateInfo(
                commandPool=self.pool,
                level=vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                commandBufferCount=n,
            ),
        )
        T = vk.VK_PIPELINE_STAGE_TRANSFER_BIT
        L = vk
        fw, fh = self.frame_w, self.frame_h
        ew, eh = self.extent
        for s in range(_SLOTS):
            for i, swap in enumerate(self.images):
                cb = self.cmds[s * len(self.images) + i]
                vk.vkBeginCommandBuffer(cb, vk.VkCommandBufferBeginInfo())
                up = self.upload[s]
                self._barrier(
                    cb, up, L.VK_IMAGE_LAYOUT_UNDEFINED, L.VK_IMAGE_LAYOUT_TRANSFER_DST_OPTIMAL,
                    0, L.VK_ACCESS_TRANSFER_WRITE_BIT, L.VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, T,
                )  # fmt: skip
                region = _whole_image_copy(fw, fh)
                vk.vkCmdCopyBufferToImage(
                    cb, self.staging[s], up, L.VK_IMAGE_LAYOUT_TRANSFER_DST_OPTIMAL, 1, [region]
                )
                self._barrier(
                    cb, up, L.VK_IMAGE_LAYOUT_TRANSFER_DST_OPTIMAL, L.VK_IMAGE_LAYOUT_TRANSFER_SRC_OPTIMAL,
                    L.VK_ACCESS_TRANSFER_WRITE_BIT, L.VK_ACCESS_TRANSFER_READ_BIT, T, T,
                )  # fmt: skip
                self._barrier(
                    cb, swap, L.VK_IMAGE_LAYOUT_UNDEFINED, L.VK_IMAGE_LAYOUT_TRANSFER_DST_OPTIMAL,
                    0, L.VK_ACCESS_TRANSFER_WRITE_BIT, T, T,
                )  # fmt: skip
                blit = vk.VkImageBlit(
                    srcSubresource=_layers(),
                    srcOffsets=[vk.VkOffset3D(x=0, y=0, z=0), vk.VkOffset3D(x=fw, y=fh, z=1)],
                    dstSubresource=_layers(),
                    dstOffsets=[vk.VkOffset3D(x=0, y=0, z=0), vk.VkOffset3D(x=ew, y=eh, z=1)],
                )
                filt = vk.VK_FILTER_NEAREST if (fw, fh) == (ew, eh) else vk.VK_FILTER_LINEAR
                vk.vkCmdBlitImage(
                    cb, up, L.VK_IMAGE_LAYOUT_TRANSFER_SRC_OPTIMAL,
                    swap, L.VK_IMAGE_LAYOUT_TRANSFER_DST_OPTIMAL, 1, [blit], filt,
                )  # fmt: skip
                layout = L.VK_IMAGE_LAYOUT_TRANSFER_DST_OPTIMAL
                if self.readback:
                    self._barrier(
                        cb, swap, layout, L.VK_IMAGE_LAYOUT_TRANSFER_SRC_OPTIMAL,
                        L.VK_ACCESS_TRANSFER_WRITE_BIT, L.VK_ACCESS_TRANSFER_READ_BIT, T, T,
                    )  # fmt: skip
                    layout = L.VK_IMAGE_LAYOUT_TRANSFER_SRC_OPTIMAL
                    rb = _whole_image_copy(ew, eh)
                    vk.vkCmdCopyImageToBuffer(cb, swap, layout, self.readback_buf, 1, [rb])
                self._barrier(
                    cb, swap, layout, L.VK_IMAGE_LAYOUT_PRESENT_SRC_KHR,
                    L.VK_ACCESS_TRANSFER_WRITE_BIT | L.VK_ACCESS_TRANSFER_READ_BIT, 0,
                    T, L.VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT,
                )  # fmt: skip
                vk.vkEndCommandBuffer(cb)

    # -- presenting ------------------------------------------------------------------------

    def present(self, rgba: np.ndarray) -> None:
        if rgba.shape != (self.frame_h, self.frame_w, 4) or rgba.dtype != np.uint8:
            raise ValueError(
                f"expected ({self.frame_h}, {self.frame_w}, 4) uint8, got {rgba.shape} {rgba.dtype}"
            )
        d = self.device
        s = self._slot
        self._slot = (s + 1) % _SLOTS
        fence = self.fences[s]
        vk.vkWaitForFences(d, 1, [fence], vk.VK_TRUE, _NO_TIMEOUT)  # this slot's last copy is done
        # FIFO: blocks only when every swapchain image is already queued (presenting too fast)
        try:
            index = self._vkAcquireNextImageKHR(
                d, self.swapchain, _NO_TIMEOUT, self.acquired[s], vk.VK_NULL_HANDLE
            )
        except (vk.VkNotReady, vk.VkTimeout):
            # seen with lavapipe under Xvfb despite the infinite timeout: no image this time;
            # the frame is skipped (counted), the next present tries again
            self.skipped += 1
            return
        vk.vkResetFences(d, 1, [fence])
        src = np.ascontiguousarray(rgba)
        vk.ffi.memmove(self.staging_ptr[s], vk.ffi.from_buffer(src), src.nbytes)
        cb = self.cmds[s * len(self.images) + index]
        submit = vk.VkSubmitInfo(
            waitSemaphoreCount=1,
            pWaitSemaphores=[self.acquired[s]],
            pWaitDstStageMask=[vk.VK_PIPELINE_STAGE_TRANSFER_BIT],
            commandBufferCount=1,
            pCommandBuffers=[cb],
            signalSemaphoreCount=1,
            pSignalSemaphores=[self.rendered[s]],
        )
        vk.vkQueueSubmit(self.queue, 1, [submit], fence)
        self._vkQueuePresentKHR(
            self.queue,
            vk.VkPresentInfoKHR(
                waitSemaphoreCount=1,
                pWaitSemaphores=[self.rendered[s]],
                swapchainCount=1,
                pSwapchains=[self.swapchain],
                pImageIndices=[index],
            ),
        )
        self._last_present = time.monotonic_ns()
        self._last_image = index
        self.presented += 1

    def last_present_ns(self) -> int | None:
        return self._last_present

    def read_last(self) -> np.ndarray:
        """The last presented swapchain image as H x W x 4 RGBA (needs readback=True)."""
        if not self.readback:
            raise RuntimeError("VulkanPresenter(readback=True) is needed for read_last()")
        vk.vkDeviceWaitIdle(self.device)
        ew, eh = self.extent
        img = (
            np.frombuffer(self.readback_map, dtype=np.uint8, count=ew * eh * 4)
            .reshape(eh, ew, 4)
            .copy()
        )
        if self.swap_format == vk.VK_FORMAT_B8G8R8A8_UNORM:
            img = img[..., [2, 1, 0, 3]]
        return img

    def close(self) -> None:
        if self.device is not None:
            with contextlib.suppress(Exception):  # a lost device still has to be torn down
                vk.vkDeviceWaitIdle(self.device)
            if self.swapchain is not None:
                self._vkDestroySwapchainKHR(self.device, self.swapchain, None)
                self.swapchain = None
            for destroy in reversed(self._destroyers):
                destroy()
            self._destroyers.clear()
            vk.vkDestroyDevice(self.device, None)
            self.device = None
        if self.surface is not None:
            self._vkDestroySurfaceKHR(self.instance, self.surface, None)
            self.surface = None
        if self.instance is not None:
            vk.vkDestroyInstance(self.instance, None)
            self.instance = None
