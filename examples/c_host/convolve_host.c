/* Run a kernel exported by `autotune export --format header` on any OpenCL device.
 *
 *   convolve_host [-d DEVICE] IMAGE FILTER OUTPUT
 *
 * IMAGE: a binary PGM (P5, 8 or 16 bit) or raw float32 given as WIDTHxHEIGHT:path.raw
 * FILTER: a text file of F*F numbers (row-major, whitespace separated); with a header of
 *   separable kernels (AUTOTUNE_SEPARABLE), 2r lines of F numbers: the r row-tap lines of
 *   the filter's terms, then their r column-tap lines (the filter is their sum of outer
 *   products, column x row)
 * OUTPUT: raw float32, (W-F+1) x (H-F+1), row-major; the size is printed.
 * DEVICE: index over all platforms' devices in the loader's order (default 0).
 *
 * The kernel is picked at run time from the header's table by the device's platform
 * and name: the one tuned on that device, else the header's default entry for the
 * filter width (stderr says which). Plain OpenCL 1.2 C API, nothing else: what any C/C++
 * project needs to use the tuned kernels. A filter width that was not exported is an
 * error. */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <ctype.h>
#include <math.h>
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

static float *read_pgm(const char *path, int *width, int *height) {
    FILE *f = fopen(path, "rb");
    if (!f) die("cannot open the image");
    int maxval;
    if (fscanf(f, "P5 %d %d %d", width, height, &maxval) != 3 || maxval <= 0 || maxval > 65535)
        die("not a binary PGM (P5)");
    fgetc(f); /* the single whitespace after the header */
    size_t n = (size_t)*width * (size_t)*height;
    float *pixels = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; ++i) {
        int hi = fgetc(f), value = hi;
        if (maxval > 255) value = (hi << 8) | fgetc(f);
        if (hi == EOF) die("truncated PGM");
        pixels[i] = (float)value;
    }
    fclose(f);
    return pixels;
}

static float *read_raw(const char *spec, int *width, int *height) {
    char path[4096];
    if (sscanf(spec, "%dx%d:%4095s", width, height, path) != 3 || *width <= 0 || *height <= 0)
        die("raw images are given as WIDTHxHEIGHT:path.raw");
    size_t n = (size_t)*width * (size_t)*height;
    float *pixels = malloc(n * sizeof(float));
    FILE *f = fopen(path, "rb");
    if (!f || fread(pixels, sizeof(float), n, f) != n) die("cannot read the raw float32 image");
    fclose(f);
    return pixels;
}

#ifndef AUTOTUNE_SEPARABLE
static float *read_filter(const char *path, int *filter_width) {
    FILE *f = fopen(path, "r");
    if (!f) die("cannot open the filter");
    size_t count = 0, capacity = 64;
    float *values = malloc(capacity * sizeof(float));
    float v;
    while (fscanf(f, "%f", &v) == 1) {
        if (count == capacity) values = realloc(values, (capacity *= 2) * sizeof(float));
        values[count++] = v;
    }
    fclose(f);
    int width = (int)lround(sqrt((double)count));
    if (count == 0 || (size_t)width * (size_t)width != count) die("the filter must hold F*F numbers");
    *filter_width = width;
    return values;
}

#else
/* 2r lines of F numbers (blank lines skipped): r lines of row taps, then r of column
 * taps; returned as one array, row taps first (the kernel's two tap arguments). */
static float *read_taps(const char *path, int *filter_width, int *rank) {
    FILE *f = fopen(path, "r");
    if (!f) die("cannot open the taps");
    size_t count = 0, capacity = 64;
    float *values = malloc(capacity * sizeof(float));
    int lines = 0, width = 0;
    static char line[1 << 16];
    while (fgets(line, sizeof line, f)) {
        int in_line = 0;
        char *cursor = line, *end;
        for (float v = strtof(cursor, &end); end != cursor; v = strtof(cursor, &end)) {
            if (count == capacity) values = realloc(values, (capacity *= 2) * sizeof(float));
            values[count++] = v;
            ++in_line;
            cursor = end;
        }
        if (in_line == 0) continue;
        if (width && in_line != width) die("every line of taps must hold the same F numbers");
        width = in_line;
        ++lines;
    }
    fclose(f);
    if (lines == 0 || lines % 2) die("the taps must be 2r lines: r lines of row taps, then r of column taps");
    *filter_width = width;
    *rank = lines / 2;
    return values;
}
#endif

int main(int argc, char **argv) {
    int device_index = 0, arg = 1;
    if (argc > 2 && strcmp(argv[1], "-d") == 0) {
        device_index = atoi(argv[2]);
        arg = 3;
    }
#ifdef AUTOTUNE_SEPARABLE
    if (argc - arg != 3) die("usage: convolve_host [-d DEVICE] IMAGE TAPS OUTPUT");
#else
    if (argc - arg != 3) die("usage: convolve_host [-d DEVICE] IMAGE FILTER OUTPUT");
#endif
    const char *image_path = argv[arg], *filter_path = argv[arg + 1], *output_path = argv[arg + 2];

    int in_width, in_height, filter_width;
    float *image = strchr(image_path, ':') ? read_raw(image_path, &in_width, &in_height)
                                           : read_pgm(image_path, &in_width, &in_height);
#ifdef AUTOTUNE_SEPARABLE
    int rank;
    float *filter = read_taps(filter_path, &filter_width, &rank); /* row taps, then column taps */
#else
    float *filter = read_filter(filter_path, &filter_width);
#endif
    if (in_width < filter_width || in_height < filter_width) die("the image is smaller than the filter");
    int out_width = in_width - filter_width + 1, out_height = in_height - filter_width + 1;

    /* The device_index-th device over all platforms. */
    cl_uint platform_count = 0;
    check(clGetPlatformIDs(0, NULL, &platform_count), "clGetPlatformIDs");
    if (platform_count == 0) die("no OpenCL platform");
    cl_platform_id *platforms = malloc(platform_count * sizeof(cl_platform_id));
    check(clGetPlatformIDs(platform_count, platforms, NULL), "clGetPlatformIDs");
    cl_device_id device = NULL;
    cl_platform_id platform = NULL;
    int seen = 0;
    for (cl_uint p = 0; p < platform_count && !device; ++p) {
        cl_uint n = 0;
        if (clGetDeviceIDs(platforms[p], CL_DEVICE_TYPE_ALL, 0, NULL, &n) != CL_SUCCESS) continue;
        cl_device_id *devices = malloc(n * sizeof(cl_device_id));
        clGetDeviceIDs(platforms[p], CL_DEVICE_TYPE_ALL, n, devices, NULL);
        if (device_index < seen + (int)n) {
            device = devices[device_index - seen];
            platform = platforms[p];
        }
        seen += (int)n;
        free(devices);
    }
    if (!device) die("no OpenCL device with that index");

    /* This device's kernel from the header's table, by platform and device name. */
    char platform_name[1024], device_name[1024];
    check(clGetPlatformInfo(platform, CL_PLATFORM_NAME, sizeof platform_name, platform_name, NULL),
          "clGetPlatformInfo");
    check(clGetDeviceInfo(device, CL_DEVICE_NAME, sizeof device_name, device_name, NULL), "clGetDeviceInfo");
    trim(platform_name);
    trim(device_name);
#ifdef AUTOTUNE_SEPARABLE
    const autotune_kernel *k = autotune_find_kernel_for(platform_name, device_name, filter_width, rank);
    if (!k) die("no exported kernel for this filter width and rank");
#else
    const autotune_kernel *k = autotune_find_kernel_for(platform_name, device_name, filter_width);
    if (!k) die("no exported kernel for this filter width");
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

    size_t in_bytes = sizeof(float) * (size_t)in_width * in_height;
#ifdef AUTOTUNE_SEPARABLE
    size_t filter_bytes = sizeof(float) * (size_t)filter_width * rank; /* one of the two tap arrays */
#else
    size_t filter_bytes = sizeof(float) * (size_t)filter_width * filter_width;
#endif
    size_t out_bytes = sizeof(float) * (size_t)out_width * out_height;
    cl_mem input_buf = clCreateBuffer(context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, in_bytes, image, &status);
    check(status, "clCreateBuffer(input)");
    cl_mem filter_buf = clCreateBuffer(context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, filter_bytes, filter,
                                       &status);
    check(status, "clCreateBuffer(filter)");
#ifdef AUTOTUNE_SEPARABLE
    cl_mem column_buf = clCreateBuffer(context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, filter_bytes,
                                       filter + (size_t)filter_width * rank, &status);
    check(status, "clCreateBuffer(column taps)");
#endif
    cl_mem output_buf = clCreateBuffer(context, CL_MEM_WRITE_ONLY, out_bytes, NULL, &status);
    check(status, "clCreateBuffer(output)");

#ifdef AUTOTUNE_SEPARABLE
    cl_mem rows_buf = NULL;
    if (k->second_kernel_name) {
        /* Two launches: the row pass into a scratch buffer of rank x in_height x pitch floats
         * (pitch: out_width rounded up to a multiple of 4), then the column pass from it, in
         * order on the queue. */
        size_t pitch = ((size_t)out_width + 3) / 4 * 4;
        rows_buf = clCreateBuffer(context, CL_MEM_READ_WRITE, sizeof(float) * (size_t)rank * in_height * pitch, NULL,
                                  &status);
        check(status, "clCreateBuffer(rows)");
        cl_kernel columns = clCreateKernel(program, k->second_kernel_name, &status);
        check(status, "clCreateKernel(second)");
        /* input, row_taps, rows, in_width, in_height, out_width */
        cl_mem row_buffers[3] = {input_buf, filter_buf, rows_buf};
        cl_int row_args[3] = {in_width, in_height, out_width};
        /* rows, column_taps, output, in_height, out_width, out_height */
        cl_mem column_buffers[3] = {rows_buf, column_buf, output_buf};
        cl_int column_args[3] = {in_height, out_width, out_height};
        for (int i = 0; i < 3; ++i) {
            check(clSetKernelArg(kernel, i, sizeof(cl_mem), &row_buffers[i]), "clSetKernelArg");
            check(clSetKernelArg(kernel, 3 + i, sizeof(cl_int), &row_args[i]), "clSetKernelArg");
            check(clSetKernelArg(columns, i, sizeof(cl_mem), &column_buffers[i]), "clSetKernelArg");
            check(clSetKernelArg(columns, 3 + i, sizeof(cl_int), &column_args[i]), "clSetKernelArg");
        }
        size_t rows_global[2], columns_global[2];
        autotune_global_size(k, (size_t)out_width, (size_t)in_height, rows_global);
        autotune_second_global_size(k, (size_t)out_width, (size_t)out_height, columns_global);
        check(clEnqueueNDRangeKernel(queue, kernel, 2, NULL, rows_global, k->local_size, 0, NULL, NULL),
              "clEnqueueNDRangeKernel(rows)");
        check(clEnqueueNDRangeKernel(queue, columns, 2, NULL, columns_global, k->second_local_size, 0, NULL, NULL),
              "clEnqueueNDRangeKernel(columns)");
        clReleaseKernel(columns);
    } else {
        /* input, row_taps, column_taps, output, in_width, in_height, out_width, out_height */
        cl_mem buffers[4] = {input_buf, filter_buf, column_buf, output_buf};
        cl_int args[4] = {in_width, in_height, out_width, out_height};
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
    /* input, filter, output, in_width, out_width, out_height, filter_width */
    cl_mem buffers[3] = {input_buf, filter_buf, output_buf};
    cl_int args[4] = {in_width, out_width, out_height, filter_width};
    for (int i = 0; i < 3; ++i)
        check(clSetKernelArg(kernel, i, sizeof(cl_mem), &buffers[i]), "clSetKernelArg");
    for (int i = 0; i < 4; ++i)
        check(clSetKernelArg(kernel, 3 + i, sizeof(cl_int), &args[i]), "clSetKernelArg");

    size_t global_size[2];
    autotune_global_size(k, (size_t)out_width, (size_t)out_height, global_size);
    check(clEnqueueNDRangeKernel(queue, kernel, 2, NULL, global_size, k->local_size, 0, NULL, NULL),
          "clEnqueueNDRangeKernel");
#endif
    float *output = malloc(out_bytes);
    check(clEnqueueReadBuffer(queue, output_buf, CL_TRUE, 0, out_bytes, output, 0, NULL, NULL),
          "clEnqueueReadBuffer");

    FILE *f = fopen(output_path, "wb");
    if (!f || fwrite(output, 1, out_bytes, f) != out_bytes) die("cannot write the output");
    fclose(f);
    printf("%dx%d\n", out_width, out_height);

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
    free(platforms);
    free(image);
    free(filter);
    free(output);
    return 0;
}
