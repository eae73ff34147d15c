/* Run a kernel exported by `autotune export --format header` on any OpenCL device.
 *
 *   convolve_host [-d DEVICE] [-t DTYPE] [-n FRAMES] [-f RxF] [-b BORDER [-v VALUE] [-a X,Y]] [-o same]
 *                 IMAGE FILTER OUTPUT
 *
 * IMAGE: a binary PGM (P5) or PPM (P6, 3 channels), 8 or 16 bit, or raw values given as
 *   WIDTHxHEIGHT:path.raw (WIDTHxHEIGHTxCHANNELS:path.raw for interleaved channels), of
 *   pixel type DTYPE (-t: uint8, uint16, int16, float16, float32 (the default), float64;
 *   native byte order); -n FRAMES: the raw file holds that many images of the size one
 *   after another, filtered as one batch (a kernel exported with --frames)
 * FILTER: a text file of numbers, row-major: one line of F*F (an F x F filter), or R lines
 *   of F (an R x F filter); -f RxF gives the size instead (a 1 x F filter on one line, say).
 *   With a header of separable kernels (AUTOTUNE_SEPARABLE),
 *   2r lines of F numbers: the r row-tap lines of the filter's terms, then their r
 *   column-tap lines (the filter is their sum of outer products, column x row)
 * BORDER: none ('valid' output, the default) or constant, replicate, reflect, mirror, wrap
 *   ('same' output: past its edge the image reads this way; VALUE: the constant's value;
 *   X,Y: the filter's column and row over each output, by default (or -1) F / 2, R / 2 as cv2's)
 * -o same: output of the image's pixel type (rounded, saturated), else float32
 * OUTPUT: raw values, row-major, channels interleaved; a .pgm or .ppm name writes such a
 *   file when the output is 8 or 16 bit (with the input's maxval, values clamped to it). stdout
 *   gets its size: WIDTHxHEIGHT[xCHANNELS][, FRAMES frames].
 * DEVICE: index over all platforms' devices in the loader's order (default 0).
 *
 * The kernel is picked at run time from the header's table by the device's platform
 * and name and by the kind the arguments make (filter size, pixel types, border, anchor,
 * channels): the one tuned on that device, else the header's default entry of that kind
 * (stderr says which). A PGM or PPM image goes to the kernel as its own 8 or 16-bit
 * pixels; for float32 output where the header holds no kernel for them, as float32
 * converted here. Plain
 * OpenCL 1.2 C API, nothing else: what any C/C++ project needs to use the tuned kernels.
 * A kind that was not exported is an error. */
#define _POSIX_C_SOURCE 200809L /* getline */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <ctype.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autotune_kernels.h"

static void die(const char *what) {
    fprintf(stderr, "convolve_host: %s\n", what);
    exit(1);
}

static void check(cl_int status, const char *what) {
    if (status != CL_SUCCESS) {
        fprintf(stderr, "convolve_host: %s failed (OpenCL error %d)\n", what, (int)status);
        exit(1);
    }
}

/* Drivers may pad names with spaces; the header holds them trimmed. */
static void trim(char *text) {
    size_t start = 0, end = strlen(text);
    while (start < end && isspace((unsigned char)text[start])) ++start;
    while (end > start && isspace((unsigned char)text[end - 1])) --end;
    memmove(text, text + start, end - start);
    text[end - start] = '\0';
}

/* An image as read: `frames` images of width x height pixels of `channels` interleaved
 * values, each of `bytes` bytes (uint8 1; uint16, int16, float16 2; float32 4; float64 8;
 * native byte order); `maxval` of a PNM. */
typedef struct {
    int width, height, channels, frames;
    size_t bytes;
    const char *dtype;
    void *values;
    int maxval;
} image_t;

static size_t image_values(const image_t *image) {
    return (size_t)image->width * (size_t)image->height * (size_t)image->channels * (size_t)image->frames;
}

static size_t pixel_bytes(const char *dtype) {
    if (strcmp(dtype, "uint8") == 0) return 1;
    if (strcmp(dtype, "float32") == 0) return 4;
    if (strcmp(dtype, "float64") == 0) return 8;
    return 2; /* uint16, int16, float16 */
}

#ifndef AUTOTUNE_SEPARABLE
/* A pixel type -t names, as the header spells it; NULL for one it does not know. */
static const char *known_dtype(const char *dtype) {
    static const char *const known[] = {"uint8", "uint16", "int16", "float16", "float32", "float64"};
    for (size_t i = 0; i < sizeof known / sizeof *known; ++i)
        if (strcmp(dtype, known[i]) == 0) return known[i];
    return NULL;
}
#endif

/* An IEEE half-precision value as float (exact: every half is a float). */
static float half_to_float(uint16_t half) {
    int exponent = (half >> 10) & 0x1f, mantissa = half & 0x3ff;
    float value;
    if (exponent == 0)
        value = ldexpf((float)mantissa, -24); /* zero and subnormals */
    else if (exponent == 31)
        value = mantissa ? NAN : INFINITY;
    else
        value = ldexpf((float)(mantissa | 0x400), exponent - 25);
    return half >> 15 ? -value : value;
}

/* The next number of a PNM header, past whitespace and # comments. */
static int pnm_number(FILE *f) {
    int c = fgetc(f);
    while (c == '#' || isspace(c)) {
        if (c == '#')
            while (c != '\n' && c != EOF) c = fgetc(f);
        c = fgetc(f);
    }
    int value = 0, digits = 0;
    for (; c != EOF && isdigit(c); c = fgetc(f), ++digits) value = value * 10 + (c - '0');
    if (digits == 0 || !isspace(c)) die("not a binary PGM (P5) or PPM (P6)");
    return value;
}

static image_t read_pnm(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) die("cannot open the image");
    char magic[2];
    if (fread(magic, 1, 2, f) != 2 || magic[0] != 'P' || (magic[1] != '5' && magic[1] != '6'))
        die("not a binary PGM (P5) or PPM (P6)");
    image_t image = {0, 0, magic[1] == '6' ? 3 : 1, 1, 1, "uint8", NULL, 0};
    image.width = pnm_number(f);
    image.height = pnm_number(f);
    int maxval = image.maxval = pnm_number(f); /* then the single whitespace pnm_number read */
    if (image.width <= 0 || image.height <= 0 || maxval <= 0 || maxval > 65535) die("bad PGM/PPM header");
    if (maxval > 255) {
        image.bytes = 2;
        image.dtype = "uint16";
    }
    size_t n = image_values(&image);
    unsigned char *raw = malloc(n * image.bytes);
    if (fread(raw, image.bytes, n, f) != n) die("truncated PGM/PPM");
    fclose(f);
    if (image.bytes == 2) { /* PNM stores 16-bit values big-endian */
        uint16_t *wide = malloc(n * sizeof(uint16_t));
        for (size_t i = 0; i < n; ++i) wide[i] = (uint16_t)(raw[2 * i] << 8 | raw[2 * i + 1]);
        free(raw);
        image.values = wide;
    } else {
        image.values = raw;
    }
    return image;
}

static image_t read_raw(const char *spec, const char *dtype, int frames) {
    char path[4096];
    image_t image = {0, 0, 1, frames, pixel_bytes(dtype), dtype, NULL, 0};
    if (sscanf(spec, "%dx%dx%d:%4095s", &image.width, &image.height, &image.channels, path) != 4) {
        image.channels = 1;
        if (sscanf(spec, "%dx%d:%4095s", &image.width, &image.height, path) != 3)
            die("raw images are given as WIDTHxHEIGHT:path.raw or WIDTHxHEIGHTxCHANNELS:path.raw");
    }
    if (image.width <= 0 || image.height <= 0 || image.channels < 1 || image.channels > 4)
        die("a raw image needs a positive size and 1 to 4 channels");
    size_t n = image_values(&image);
    image.values = malloc(n * image.bytes);
    FILE *f = fopen(path, "rb");
    if (!f || fread(image.values, image.bytes, n, f) != n) die("cannot read the raw image (its size, -t, -n)");
    fclose(f);
    return image;
}

/* The image's values as float32 (a copy, unless they are float32 already). */
static image_t as_float32(image_t image) {
    if (image.bytes == sizeof(float)) return image;
    size_t n = image_values(&image);
    float *values = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; ++i) {
        if (strcmp(image.dtype, "uint8") == 0)
            values[i] = (float)((const unsigned char *)image.values)[i];
        else if (strcmp(image.dtype, "uint16") == 0)
            values[i] = (float)((const uint16_t *)image.values)[i];
        else if (strcmp(image.dtype, "int16") == 0)
            values[i] = (float)((const int16_t *)image.values)[i];
        else if (strcmp(image.dtype, "float16") == 0)
            values[i] = half_to_float(((const uint16_t *)image.values)[i]);
        else
            values[i] = (float)((const double *)image.values)[i]; /* float64 */
    }
    free(image.values);
    image.values = values;
    image.bytes = sizeof(float);
    image.dtype = "float32";
    return image;
}

/* Lines of numbers (blank lines skipped), all of one length: their count and length. */
static float *read_numbers(const char *path, int *lines, int *per_line) {
    FILE *f = fopen(path, "r");
    if (!f) die("cannot open the filter");
    size_t count = 0, capacity = 64;
    float *values = malloc(capacity * sizeof(float));
    *lines = *per_line = 0;
    char *line = NULL;
    size_t line_capacity = 0;
    while (getline(&line, &line_capacity, f) != -1) {
        int in_line = 0;
        char *cursor = line, *end;
        for (float v = strtof(cursor, &end); end != cursor; v = strtof(cursor, &end)) {
            if (count == capacity) values = realloc(values, (capacity *= 2) * sizeof(float));
            values[count++] = v;
            ++in_line;
            cursor = end;
        }
        if (in_line == 0) continue;
        if (*per_line && in_line != *per_line) die("every line of the filter must hold the same count of numbers");
        *per_line = in_line;
        ++*lines;
    }
    free(line);
    fclose(f);
    if (*lines == 0) die("the filter holds no numbers");
    return values;
}

#ifndef AUTOTUNE_SEPARABLE
/* One line of F*F numbers: F x F; R lines of F: R x F; with `size` (RxF) given, that
 * many numbers in any lines. */
static float *read_filter(const char *path, const char *size, int *filter_height, int *filter_width) {
    int lines, per_line;
    float *values = read_numbers(path, &lines, &per_line);
    *filter_height = lines;
    *filter_width = per_line;
    if (size) {
        if (sscanf(size, "%dx%d", filter_height, filter_width) != 2 || *filter_height <= 0 || *filter_width <= 0)
            die("-f takes the filter's size as ROWSxF");
        if ((long)*filter_height * *filter_width != (long)lines * per_line)
            die("the filter does not hold ROWS*F numbers (-f)");
    } else if (lines == 1) {
        int width = (int)lround(sqrt((double)per_line));
        if (width * width != per_line) die("one line of a filter must hold F*F numbers");
        *filter_height = *filter_width = width;
    }
    return values;
}

/* Output as a PGM/PPM file where its name says so and its pixels are 8 or 16 bit, with
 * `maxval` (the input's; values above it clamped, as the kernel saturates at the type's). */
static int write_pnm(const char *path, const void *values, size_t bytes, const char *dtype, int width,
                     int height, int channels, int maxval) {
    size_t length = strlen(path);
    int pgm = length > 4 && strcmp(path + length - 4, ".pgm") == 0;
    int ppm = length > 4 && strcmp(path + length - 4, ".ppm") == 0;
    if (!pgm && !ppm) return 0;
    if ((pgm && channels != 1) || (ppm && channels != 3)) die("a .pgm output takes 1 channel, a .ppm 3");
    if (strcmp(dtype, "uint8") != 0 && strcmp(dtype, "uint16") != 0)
        die("a .pgm or .ppm output needs 8 or 16-bit pixels (-o same with such an image)");
    FILE *f = fopen(path, "wb");
    if (!f) die("cannot write the output");
    int top = bytes == 1 ? 255 : 65535;
    if (maxval <= 0 || maxval > top) maxval = top;
    fprintf(f, "P%c\n%d %d\n%d\n", pgm ? '5' : '6', width, height, maxval);
    size_t n = (size_t)width * height * channels;
    for (size_t i = 0; i < n; ++i) {
        int v = bytes == 1 ? ((const unsigned char *)values)[i] : ((const uint16_t *)values)[i];
        v = v < maxval ? v : maxval;
        if (bytes == 1) {
            fputc(v, f);
        } else {
            fputc(v >> 8, f);
            fputc(v & 0xff, f);
        }
    }
    if (fclose(f) != 0) die("cannot write the output");
    return 1;
}

#else
/* 2r lines of F numbers (blank lines skipped): r lines of row taps, then r of column
 * taps; returned as one array, row taps first (the kernel's two tap arguments). */
static float *read_taps(const char *path, int *filter_width, int *rank) {
    int lines;
    float *values = read_numbers(path, &lines, filter_width);
    if (lines % 2) die("the taps must be 2r lines: r lines of row taps, then r of column taps");
    *rank = lines / 2;
    return values;
}
#endif

#ifdef AUTOTUNE_SEPARABLE
#define USAGE "usage: convolve_host [-d DEVICE] IMAGE TAPS OUTPUT"
#else
#define USAGE                                                                                            \
    "usage: convolve_host [-d DEVICE] [-t DTYPE] [-n FRAMES] [-f RxF] [-b BORDER [-v VALUE] [-a X,Y]] [-o same] " \
    "IMAGE FILTER OUTPUT"
#endif

/* The device_index-th device over all platforms, and its platform. */
static cl_device_id pick_device(int device_index, cl_platform_id *platform) {
    cl_uint platform_count = 0;
    check(clGetPlatformIDs(0, NULL, &platform_count), "clGetPlatformIDs");
    if (platform_count == 0) die("no OpenCL platform");
    cl_platform_id *platforms = malloc(platform_count * sizeof(cl_platform_id));
    check(clGetPlatformIDs(platform_count, platforms, NULL), "clGetPlatformIDs");
    cl_device_id device = NULL;
    int seen = 0;
    for (cl_uint p = 0; p < platform_count && !device; ++p) {
        cl_uint n = 0;
        if (clGetDeviceIDs(platforms[p], CL_DEVICE_TYPE_ALL, 0, NULL, &n) != CL_SUCCESS) continue;
        cl_device_id *devices = malloc(n * sizeof(cl_device_id));
        clGetDeviceIDs(platforms[p], CL_DEVICE_TYPE_ALL, n, devices, NULL);
        if (device_index >= seen && device_index < seen + (int)n) {
            device = devices[device_index - seen];
            *platform = platforms[p];
        }
        seen += (int)n;
        free(devices);
    }
    free(platforms);
    if (!device) die("no OpenCL device with that index");
    return device;
}

static cl_mem buffer(cl_context context, cl_mem_flags flags, size_t bytes, void *values, const char *what) {
    cl_int status;
    cl_mem made = clCreateBuffer(context, flags | (values ? CL_MEM_COPY_HOST_PTR : 0), bytes, values, &status);
    check(status, what);
    return made;
}

int main(int argc, char **argv) {
    int device_index = 0, arg = 1, frames = 1;
    const char *raw_dtype = "float32";
#ifndef AUTOTUNE_SEPARABLE
    const char *border = "none", *filter_size = NULL;
    float border_value = 0.0f;
    int anchor = -1, anchor_y = -1, same_pixels_out = 0, border_options = 0;
#endif
    while (argc - arg > 3 && argv[arg][0] == '-' && argv[arg][1] && !argv[arg][2]) {
        const char *value = argv[arg + 1];
        switch (argv[arg][1]) {
            case 'd': device_index = atoi(value); break;
#ifndef AUTOTUNE_SEPARABLE
            case 't':
                raw_dtype = known_dtype(value);
                if (!raw_dtype) die("-t takes uint8, uint16, int16, float16, float32 or float64");
                break;
            case 'n': {
                char *end;
                long count = strtol(value, &end, 10);
                if (end == value || *end || count < 1 || count > 65536) die("-n takes a count of frames, 1 to 65536");
                frames = (int)count;
                break;
            }
            case 'b': border = value; break;
            case 'f': filter_size = value; break;
            case 'v': {
                char *end;
                border_value = strtof(value, &end);
                if (end == value || *end) die("-v takes a number");
                ++border_options;
                break;
            }
            case 'a':
                if (sscanf(value, "%d,%d", &anchor, &anchor_y) != 2) die("-a takes the filter's column and row: X,Y");
                ++border_options;
                break;
            case 'o':
                if (strcmp(value, "same") != 0 && strcmp(value, "float32") != 0) die("-o takes same or float32");
                same_pixels_out = strcmp(value, "same") == 0;
                break;
#endif
            default: die(USAGE);
        }
        arg += 2;
    }
    if (argc - arg != 3) die(USAGE);
    const char *image_path = argv[arg], *filter_path = argv[arg + 1], *output_path = argv[arg + 2];
    int raw = strchr(image_path, ':') != NULL;
    if (!raw && (frames > 1 || strcmp(raw_dtype, "float32") != 0))
        die("-t and -n describe a raw image (WIDTHxHEIGHT:path), not a PGM or PPM");
    image_t image = raw ? read_raw(image_path, raw_dtype, frames) : read_pnm(image_path);

    cl_platform_id platform = NULL;
    cl_device_id device = pick_device(device_index, &platform);
    char platform_name[1024], device_name[1024];
    check(clGetPlatformInfo(platform, CL_PLATFORM_NAME, sizeof platform_name, platform_name, NULL),
          "clGetPlatformInfo");
    check(clGetDeviceInfo(device, CL_DEVICE_NAME, sizeof device_name, device_name, NULL), "clGetDeviceInfo");
    trim(platform_name);
    trim(device_name);

    /* This device's kernel from the header's table, by platform, device name and kind. */
#ifdef AUTOTUNE_SEPARABLE
    int filter_width, rank;
    float *filter = read_taps(filter_path, &filter_width, &rank); /* row taps, then column taps */
    image = as_float32(image);
    if (image.channels != 1) die("separable kernels take one channel");
    if (image.width < filter_width || image.height < filter_width) die("the image is smaller than the filter");
    int out_width = image.width - filter_width + 1, out_height = image.height - filter_width + 1;
    const autotune_kernel *k = autotune_find_kernel_for(platform_name, device_name, filter_width, rank);
    if (!k) die("no exported kernel for this filter width and rank");
#else
    int filter_height, filter_width;
    float *filter = read_filter(filter_path, filter_size, &filter_height, &filter_width);
    int same = strcmp(border, "none") != 0;
    if (border_options && !same) die("-v and -a need a border (-b): 'valid' output has neither");
    if (anchor == -1) anchor = filter_width / 2; /* cv2.filter2D's default anchor */
    if (anchor_y == -1) anchor_y = filter_height / 2;
    if (!same && (image.width < filter_width || image.height < filter_height))
        die("the image is smaller than the filter ('valid' output)");
    if (anchor < 0 || anchor >= filter_width || anchor_y < 0 || anchor_y >= filter_height)
        die("-a X,Y must name a column and a row of the filter");
    int out_width = same ? image.width : image.width - filter_width + 1;
    int out_height = same ? image.height : image.height - filter_height + 1;
    autotune_kind kind = autotune_default_kind(filter_width);
    kind.filter_height = filter_height;
    kind.border = border;
    kind.anchor = same ? anchor : -1;
    kind.anchor_y = same ? anchor_y : -1;
    kind.channels = image.channels;
    kind.batch = image.frames > 1;
    kind.out_dtype = same_pixels_out ? image.dtype : "float32";
    /* The image's own pixels; else (float32 output) float32, converted here. */
    kind.dtype = image.dtype;
    const autotune_kernel *k = autotune_find_kernel_of(platform_name, device_name, &kind);
    if (!k && image.bytes != sizeof(float) && !same_pixels_out) {
        kind.dtype = "float32";
        k = autotune_find_kernel_of(platform_name, device_name, &kind);
        if (k) image = as_float32(image);
    }
    if (!k) {
        fprintf(stderr,
                "convolve_host: no exported kernel for a %dx%d filter, %s->%s pixels, %d channel(s), border %s"
                " (anchor %d,%d)%s\n",
                filter_height, filter_width, image.dtype, kind.out_dtype, image.channels, border, kind.anchor,
                kind.anchor_y, kind.batch ? ", frames in one launch" : "");
        return 1;
    }
#endif
    fprintf(stderr, "convolve_host: %s (%s): %s\n", device_name, platform_name,
            k->device < 0 ? "no kernel tuned on it, using the default entry" : "kernel tuned on it");

    cl_int status;
    cl_context context = clCreateContext(NULL, 1, &device, NULL, NULL, &status);
    check(status, "clCreateContext");
    cl_command_queue queue = clCreateCommandQueue(context, device, 0, &status);
    check(status, "clCreateCommandQueue");
    const char *source = k->source;
    cl_program program = clCreateProgramWithSource(context, 1, &source, NULL, &status);
    check(status, "clCreateProgramWithSource");
    if (clBuildProgram(program, 1, &device, k->build_options, NULL, NULL) != CL_SUCCESS) {
        char log[16384];
        clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, sizeof log, log, NULL);
        fprintf(stderr, "%s\n", log);
        die("the kernel did not build");
    }
    cl_kernel kernel = clCreateKernel(program, k->kernel_name, &status);
    check(status, "clCreateKernel");

    cl_mem input_buf = buffer(context, CL_MEM_READ_ONLY, image_values(&image) * image.bytes, image.values,
                              "clCreateBuffer(input)");
#ifdef AUTOTUNE_SEPARABLE
    size_t filter_bytes = sizeof(float) * (size_t)filter_width * rank; /* one of the two tap arrays */
    size_t out_bytes = sizeof(float) * (size_t)out_width * out_height;
    const char *out_dtype = "float32";
    cl_mem filter_buf = buffer(context, CL_MEM_READ_ONLY, filter_bytes, filter, "clCreateBuffer(row taps)");
    cl_mem column_buf = buffer(context, CL_MEM_READ_ONLY, filter_bytes, filter + (size_t)filter_width * rank,
                               "clCreateBuffer(column taps)");
    cl_mem output_buf = buffer(context, CL_MEM_WRITE_ONLY, out_bytes, NULL, "clCreateBuffer(output)");
    cl_mem rows_buf = NULL;
    if (k->second_kernel_name) {
        /* Two launches: the row pass into a scratch buffer of rank x in_height x pitch floats
         * (pitch: out_width rounded up to a multiple of 4), then the column pass from it, in
         * order on the queue. */
        size_t pitch = ((size_t)out_width + 3) / 4 * 4;
        rows_buf = buffer(context, CL_MEM_READ_WRITE, sizeof(float) * (size_t)rank * image.height * pitch, NULL,
                          "clCreateBuffer(rows)");
        cl_kernel columns = clCreateKernel(program, k->second_kernel_name, &status);
        check(status, "clCreateKernel(second)");
        /* input, row_taps, rows, in_width, in_height, out_width */
        cl_mem row_buffers[3] = {input_buf, filter_buf, rows_buf};
        cl_int row_args[3] = {image.width, image.height, out_width};
        /* rows, column_taps, output, in_height, out_width, out_height */
        cl_mem column_buffers[3] = {rows_buf, column_buf, output_buf};
        cl_int column_args[3] = {image.height, out_width, out_height};
        for (int i = 0; i < 3; ++i) {
            check(clSetKernelArg(kernel, i, sizeof(cl_mem), &row_buffers[i]), "clSetKernelArg");
            check(clSetKernelArg(kernel, 3 + i, sizeof(cl_int), &row_args[i]), "clSetKernelArg");
            check(clSetKernelArg(columns, i, sizeof(cl_mem), &column_buffers[i]), "clSetKernelArg");
            check(clSetKernelArg(columns, 3 + i, sizeof(cl_int), &column_args[i]), "clSetKernelArg");
        }
        size_t rows_global[2], columns_global[2];
        autotune_global_size(k, (size_t)out_width, (size_t)image.height, rows_global);
        autotune_second_global_size(k, (size_t)out_width, (size_t)out_height, columns_global);
        check(clEnqueueNDRangeKernel(queue, kernel, 2, NULL, rows_global, k->local_size, 0, NULL, NULL),
              "clEnqueueNDRangeKernel(rows)");
        check(clEnqueueNDRangeKernel(queue, columns, 2, NULL, columns_global, k->second_local_size, 0, NULL, NULL),
              "clEnqueueNDRangeKernel(columns)");
        clReleaseKernel(columns);
    } else {
        /* input, row_taps, column_taps, output, in_width, in_height, out_width, out_height */
        cl_mem buffers[4] = {input_buf, filter_buf, column_buf, output_buf};
        cl_int args[4] = {image.width, image.height, out_width, out_height};
        for (int i = 0; i < 4; ++i) {
            check(clSetKernelArg(kernel, i, sizeof(cl_mem), &buffers[i]), "clSetKernelArg");
            check(clSetKernelArg(kernel, 4 + i, sizeof(cl_int), &args[i]), "clSetKernelArg");
        }
        size_t global_size[2];
        autotune_global_size(k, (size_t)out_width, (size_t)out_height, global_size);
        check(clEnqueueNDRangeKernel(queue, kernel, 2, NULL, global_size, k->local_size, 0, NULL, NULL),
              "clEnqueueNDRangeKernel");
    }
#else
    const char *out_dtype = k->out_dtype;
    size_t out_bytes = pixel_bytes(out_dtype) * (size_t)out_width * out_height * image.channels * image.frames;
    cl_mem filter_buf = buffer(context, CL_MEM_READ_ONLY, sizeof(float) * (size_t)filter_height * filter_width,
                               filter, "clCreateBuffer(filter)");
    cl_mem output_buf = buffer(context, CL_MEM_WRITE_ONLY, out_bytes, NULL, "clCreateBuffer(output)");
    /* input, filter, output, in_width, out_width, out_height, filter_width[, border_value];
     * widths count values: pixels x channels */
    cl_mem buffers[3] = {input_buf, filter_buf, output_buf};
    cl_int args[4] = {image.width * image.channels, out_width * image.channels, out_height, filter_width};
    for (int i = 0; i < 3; ++i)
        check(clSetKernelArg(kernel, i, sizeof(cl_mem), &buffers[i]), "clSetKernelArg");
    for (int i = 0; i < 4; ++i)
        check(clSetKernelArg(kernel, 3 + i, sizeof(cl_int), &args[i]), "clSetKernelArg");
    if (same) check(clSetKernelArg(kernel, 7, sizeof(cl_float), &border_value), "clSetKernelArg");

    size_t global_size[3], local_size[3] = {k->local_size[0], k->local_size[1], 1};
    autotune_launch_size(k, (size_t)out_width, (size_t)out_height, (size_t)image.frames, global_size);
    check(clEnqueueNDRangeKernel(queue, kernel, k->batch ? 3 : 2, NULL, global_size, local_size, 0, NULL, NULL),
          "clEnqueueNDRangeKernel");
#endif
    void *output = malloc(out_bytes);
    check(clEnqueueReadBuffer(queue, output_buf, CL_TRUE, 0, out_bytes, output, 0, NULL, NULL),
          "clEnqueueReadBuffer");

#ifdef AUTOTUNE_SEPARABLE
    int written = 0;
    (void)out_dtype;
#else
    int written = image.frames == 1 && write_pnm(output_path, output, pixel_bytes(out_dtype), out_dtype,
                                                 out_width, out_height, image.channels, image.maxval);
#endif
    if (!written) {
        FILE *f = fopen(output_path, "wb");
        if (!f || fwrite(output, 1, out_bytes, f) != out_bytes) die("cannot write the output");
        fclose(f);
    }
    if (image.channels == 1)
        printf("%dx%d", out_width, out_height);
    else
        printf("%dx%dx%d", out_width, out_height, image.channels);
    if (image.frames > 1)
        printf(", %d frames", image.frames);
    printf("\n");

    clReleaseMemObject(input_buf);
    clReleaseMemObject(filter_buf);
#ifdef AUTOTUNE_SEPARABLE
    clReleaseMemObject(column_buf);
    if (rows_buf) clReleaseMemObject(rows_buf);
#endif
    clReleaseMemObject(output_buf);
    clReleaseKernel(kernel);
    clReleaseProgram(program);
    clReleaseCommandQueue(queue);
    clReleaseContext(context);
    free(image.values);
    free(filter);
    free(output);
    return 0;
}
