// exemplar: group_norm
// keywords: groupnorm group_norm groups num_groups channels norm mean variance eps weight bias
// ops: native_group_norm group_norm
// optional: weight=1 bias=0
// about: GroupNorm on [batch, channels, spatial]: statistics per (sample, group of channels), then a per-channel affine.
#include <cmath>
#include <cstdint>

// the sum of n contiguous values
static inline float sum_of(const float* v, int64_t n) {
    float s = 0.0f;
    #pragma omp simd reduction(+ : s)
    for (int64_t i = 0; i < n; ++i) s += v[i];
    return s;
}

// the sum of squared differences from mean of n contiguous values
static inline float sq_dev_of(const float* v, float mean, int64_t n) {
    float s = 0.0f;
    #pragma omp simd reduction(+ : s)
    for (int64_t i = 0; i < n; ++i) {
        float d = v[i] - mean;
        s += d * d;
    }
    return s;
}

// yc[s] = xc[s] * a + b over one channel's spatial values
static inline void affine_channel(const float* xc, float a, float b, float* yc, int64_t spatial) {
    #pragma omp simd
    for (int64_t s = 0; s < spatial; ++s) yc[s] = xc[s] * a + b;
}

extern "C" void kernel_forward(const float* x, const float* weight, const float* bias, float* out,
                               int64_t batch, int64_t channels, int64_t spatial, float eps, int64_t num_groups) {
    const int64_t per_group = channels / num_groups;
    const int64_t count = per_group * spatial;
    #pragma omp parallel for collapse(2) schedule(static)
    for (int64_t n = 0; n < batch; ++n) {
        for (int64_t g = 0; g < num_groups; ++g) {
            const int64_t base = (n * channels + g * per_group) * spatial;  // a group is contiguous
            const float mean = sum_of(x + base, count) / (float)count;
            const float inv_std = 1.0f / std::sqrt(sq_dev_of(x + base, mean, count) / (float)count + eps);
            for (int64_t k = 0; k < per_group; ++k) {
                const int64_t ch = g * per_group + k;
                const float a = inv_std * weight[ch];
                const float b = bias[ch] - mean * a;
                affine_channel(x + base + k * spatial, a, b, out + base + k * spatial, spatial);
            }
        }
    }
}
