/* A thin C shim over NPP's general 2D filters for bench/npp_compare.py: NPP's entry
 * points take structs by value and a stream context whose layout is the header's, so
 * they are called from C, built against the installed headers, and loaded with ctypes.
 *
 * Returns the NppStatus (0: success). border: -1 for 'valid' output (nppiFilter32f: the
 * source pointer is moved to the anchor of the first output), else an NppiBorderType
 * for 'same' output (nppiFilterBorder32f). */
#include <npp.h>

/* libnppc exports it; CUDA 13's headers no longer declare it (an identical prototype is
 * harmless where they still do). */
NppStatus nppGetStreamContext(NppStreamContext *context);

int npp_filter_8u(const Npp8u *src, int src_step, int width, int height, Npp8u *dst, int dst_step,
                  int out_width, int out_height, const Npp32f *taps, int taps_width, int taps_height,
                  int anchor_x, int anchor_y, int channels, int border) {
    NppStreamContext context;
    NppStatus status = nppGetStreamContext(&context);
    if (status != NPP_SUCCESS) return (int)status;
    NppiSize taps_size = {taps_width, taps_height};
    NppiPoint anchor = {anchor_x, anchor_y};
    NppiSize roi = {out_width, out_height};
    if (border < 0) {
        const Npp8u *first = src + (size_t)anchor_y * src_step + (size_t)anchor_x * channels;
        if (channels == 1)
            return (int)nppiFilter32f_8u_C1R_Ctx(first, src_step, dst, dst_step, roi, taps, taps_size, anchor, context);
        if (channels == 3)
            return (int)nppiFilter32f_8u_C3R_Ctx(first, src_step, dst, dst_step, roi, taps, taps_size, anchor, context);
        return -1000;
    }
    NppiSize source = {width, height};
    NppiPoint offset = {0, 0};
    if (channels == 1)
        return (int)nppiFilterBorder32f_8u_C1R_Ctx(src, src_step, source, offset, dst, dst_step, roi, taps,
                                                   taps_size, anchor, (NppiBorderType)border, context);
    if (channels == 3)
        return (int)nppiFilterBorder32f_8u_C3R_Ctx(src, src_step, source, offset, dst, dst_step, roi, taps,
                                                   taps_size, anchor, (NppiBorderType)border, context);
    return -1000;
}

/* The header's values of the borders the bench asks for (0: mirror, 1: replicate). */
int npp_border(int which) { return which == 0 ? (int)NPP_BORDER_MIRROR : (int)NPP_BORDER_REPLICATE; }
