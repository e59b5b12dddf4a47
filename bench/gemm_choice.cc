// gemm_choice: the measurement behind kiln's BLAS choice (docs/dependencies.md). On kiln's
// own GEMM shapes it times oneDNN dnnl_sgemm against OpenBLAS cblas_sgemm, each both with
// the library's own threads and single-threaded per block from kiln's ComputePool (blocks
// from gemm_blocks(), i.e. exactly kiln's partition), in alternating rounds because the
// machine is noisy; prints medians and ratios, and whether each variant's bits change with
// the thread count.
//
//   gemm_choice [--rounds R] [--min-time S] [--threads T] [--blocks B [--split m|n]]
//               [--only SUBSTRING] [--single] [--quiet-ms MS] [--no-timing]
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <oneapi/dnnl/dnnl.h>

#include "base/compute_pool.h"
#include "kernels/cpu/gemm.h"
#include "kiln/profile.h"

extern "C" {
void openblas_set_num_threads(int num_threads);
char* openblas_get_config(void);
char* openblas_get_corename(void);
}

namespace {

using kiln::ComputePool;
using kiln::GemmBlocks;
using kiln::GemmDims;

struct GemmShape {
  const char* name;
  int64_t m, n, k;
  bool trans_a, trans_b;
};

// kiln's layouts: activations [batch, features] times weights [in, out] (no transpose in
// the forward pass); backward passes transpose one operand.
constexpr GemmShape kShapes[] = {
    {"mlp fwd L1 (128x784)(784x512)", 128, 512, 784, false, false},
    {"mlp fwd L2 (128x512)(512x512)", 128, 512, 512, false, false},
    {"mlp fwd L3 (128x512)(512x10)", 128, 10, 512, false, false},
    {"mlp dW1 (128x512)^T(128x784)", 512, 784, 128, true, false},
    {"mlp dW1 (128x784)^T(128x512)", 784, 512, 128, true, false},
    {"mlp dW2 (128x512)^T(128x512)", 512, 512, 128, true, false},
    {"mlp dW3 (128x512)^T(128x10)", 512, 10, 128, true, false},
    {"mlp dX2 (128x512)(512x512)^T", 128, 512, 512, false, true},
    {"mlp dX3 (128x10)(512x10)^T", 128, 512, 10, false, true},
    {"square (512x512)(512x512)", 512, 512, 512, false, false},
    {"square (2048x2048)(2048x2048)", 2048, 2048, 2048, false, false},
    {"cnn conv1 (86528x9)(9x32)", 86528, 32, 9, false, false},
    {"cnn conv2 (15488x288)(288x64)", 15488, 64, 288, false, false},
    // Small C, long K (a weight gradient over a large batch): where a library may split K
    // across threads.
    {"deep K (64x32768)(32768x64)", 64, 64, 32768, false, false},
};

GemmDims dims_of(const GemmShape& s) {
  return GemmDims{.trans_a = s.trans_a,
                  .trans_b = s.trans_b,
                  .m = s.m,
                  .n = s.n,
                  .k = s.k,
                  .lda = s.trans_a ? s.m : s.k,
                  .ldb = s.trans_b ? s.k : s.n,
                  .ldc = s.n};
}

struct Options {
  int rounds = 7;
  double min_time = 0.15;
  int threads = 2;
  int64_t blocks = 0;  // 0: kiln's gemm_blocks()
  char split = 0;      // 'm' or 'n' with --blocks; 0: kiln's choice
  const char* only = nullptr;
  bool single = false;
  int quiet_ms = 150;
  bool timing = true;
  bool pair = false;
};

void dnnl_call(const GemmDims& d, const float* a, const float* b, float* c) {
  dnnl_status_t status = dnnl_sgemm(d.trans_a ? 'T' : 'N', d.trans_b ? 'T' : 'N', d.m, d.n, d.k,
                                    1.0f, a, d.lda, b, d.ldb, 0.0f, c, d.ldc);
  if (status != dnnl_success) {
    std::fprintf(stderr, "dnnl_sgemm failed: %d\n", static_cast<int>(status));
    std::exit(1);
  }
}

void openblas_call(const GemmDims& d, const float* a, const float* b, float* c) {
  cblas_sgemm(CblasRowMajor, d.trans_a ? CblasTrans : CblasNoTrans,
              d.trans_b ? CblasTrans : CblasNoTrans, static_cast<int>(d.m), static_cast<int>(d.n),
              static_cast<int>(d.k), 1.0f, a, static_cast<int>(d.lda), b, static_cast<int>(d.ldb),
              0.0f, c, static_cast<int>(d.ldc));
}

using LibraryCall = void (*)(const GemmDims&, const float*, const float*, float*);

GemmBlocks blocks_for(const GemmDims& d, const Options& options) {
  GemmBlocks blocks = kiln::gemm_blocks(d.m, d.n, d.k);
  if (options.blocks > 0) {
    if (options.split != 0) blocks.split_m = options.split == 'm';
    int64_t extent = blocks.split_m ? d.m : d.n;
    blocks.size = (extent + options.blocks - 1) / options.blocks;
    blocks.size = (blocks.size + 15) / 16 * 16;
    blocks.count = (extent + blocks.size - 1) / blocks.size;
  }
  return blocks;
}

// The library single-threaded on each block of C, blocks run as pool chunks.
void pool_call(ComputePool& pool, const GemmBlocks& blocks, LibraryCall call, bool is_dnnl,
               const GemmDims& d, const float* a, const float* b, float* c) {
  pool.parallel_for(blocks.count, [&](int64_t block) {
    if (is_dnnl) omp_set_num_threads(1);  // per calling thread
    int64_t begin = block * blocks.size;
    GemmDims part = d;
    if (blocks.split_m) {
      part.m = std::min(blocks.size, d.m - begin);
      call(part, d.trans_a ? a + begin : a + begin * d.lda, b, c + begin * d.ldc);
    } else {
      part.n = std::min(blocks.size, d.n - begin);
      call(part, a, d.trans_b ? b + begin * d.ldb : b + begin, c + begin);
    }
  });
}

struct Variant {
  std::string name;
  // Runs one GEMM with `threads` threads (library threads, or a pool of that size).
  std::function<void(int threads, const GemmDims&, const float*, const float*, float*)> run;
};

std::vector<Variant> make_variants(const Options& options) {
  std::vector<Variant> variants;
  auto pool_of = [](int threads) -> ComputePool& {
    static std::vector<std::unique_ptr<ComputePool>> pools(17);
    auto& slot = pools[static_cast<size_t>(threads)];
    if (!slot) slot = std::make_unique<ComputePool>(threads);
    return *slot;
  };
  variants.push_back({"onednn own-threads",
                      [](int t, const GemmDims& d, const float* a, const float* b, float* c) {
                        omp_set_num_threads(t);
                        dnnl_call(d, a, b, c);
                      }});
  variants.push_back({"openblas own-threads",
                      [](int t, const GemmDims& d, const float* a, const float* b, float* c) {
                        openblas_set_num_threads(t);
                        openblas_call(d, a, b, c);
                      }});
  variants.push_back(
      {"onednn kiln-pool",
       [&options, pool_of](int t, const GemmDims& d, const float* a, const float* b, float* c) {
         pool_call(pool_of(t), blocks_for(d, options), dnnl_call, true, d, a, b, c);
       }});
  variants.push_back(
      {"openblas kiln-pool",
       [&options, pool_of](int t, const GemmDims& d, const float* a, const float* b, float* c) {
         openblas_set_num_threads(1);
         pool_call(pool_of(t), blocks_for(d, options), openblas_call, false, d, a, b, c);
       }});
  if (options.single) {
    variants.push_back(
        {"onednn 1 thread", [](int, const GemmDims& d, const float* a, const float* b, float* c) {
           omp_set_num_threads(1);
           dnnl_call(d, a, b, c);
         }});
    variants.push_back(
        {"openblas 1 thread", [](int, const GemmDims& d, const float* a, const float* b, float* c) {
           openblas_set_num_threads(1);
           openblas_call(d, a, b, c);
         }});
  }
  return variants;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

using kiln::profile::median;

std::vector<float> random_matrix(size_t count, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-0.5f, 0.5f);
  std::vector<float> values(count);
  for (float& value : values) value = dist(rng);
  return values;
}

bool same_bits(const std::vector<float>& x, const std::vector<float>& y) {
  return std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}

double max_rel_diff(const std::vector<float>& x, const std::vector<float>& y) {
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    double scale = std::max({std::fabs(static_cast<double>(x[i])), 1e-30});
    worst = std::max(worst, std::fabs(static_cast<double>(x[i]) - y[i]) / scale);
  }
  return worst;
}

double load_average() {
  std::ifstream in("/proc/loadavg");
  double one_minute = -1;
  in >> one_minute;
  return one_minute;
}

Options parse(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", arg.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (arg == "--rounds") {
      options.rounds = std::atoi(next());
    } else if (arg == "--min-time") {
      options.min_time = std::atof(next());
    } else if (arg == "--threads") {
      options.threads = std::atoi(next());
    } else if (arg == "--blocks") {
      options.blocks = std::atoll(next());
    } else if (arg == "--split") {
      options.split = next()[0];
    } else if (arg == "--only") {
      options.only = next();
    } else if (arg == "--single") {
      options.single = true;
    } else if (arg == "--quiet-ms") {
      options.quiet_ms = std::atoi(next());
    } else if (arg == "--no-timing") {
      options.timing = false;
    } else if (arg == "--pair") {
      options.pair = true;
    } else {
      std::fprintf(stderr,
                   "usage: gemm_choice [--rounds R] [--min-time S] [--threads T] [--blocks B "
                   "[--split m|n]] [--only SUBSTRING] [--single] [--quiet-ms MS] [--no-timing] "
                   "[--pair]\n");
      std::exit(2);
    }
  }
  options.threads = std::clamp(options.threads, 1, 16);
  options.rounds = std::max(options.rounds, 1);
  return options;
}

// The two backward GEMMs of the MLP's middle layer (dW = h^T dY and dX = dY W^T) do not
// depend on each other. kiln runs them one after the other, each split into gemm_blocks()
// over the pool. A scheduler could run them side by side, each whole on one thread, and save
// one GEMM's packing and one fork-join: this measures what that would buy, and checks that
// the whole GEMMs give the blocked ones' bits.
void run_pair(const Options& options) {
  std::mt19937 rng(2);
  GemmDims dw = dims_of({"dW", 512, 512, 128, true, false});
  GemmDims dx = dims_of({"dX", 128, 512, 512, false, true});
  std::vector<float> h = random_matrix(128 * 512, rng), dy = random_matrix(128 * 512, rng);
  std::vector<float> w = random_matrix(512 * 512, rng);
  std::vector<float> dw_blocked(512 * 512), dx_blocked(128 * 512);
  std::vector<float> dw_whole(512 * 512), dx_whole(128 * 512);
  ComputePool pool(options.threads);
  auto one_after_the_other = [&] {
    kiln::gemm(pool, dw, h.data(), dy.data(), dw_blocked.data());
    kiln::gemm(pool, dx, dy.data(), w.data(), dx_blocked.data());
  };
  auto side_by_side = [&] {
    pool.parallel_for(2, [&](int64_t which) {
      if (which == 0) kiln::gemm_serial(dw, h.data(), dy.data(), dw_whole.data());
      if (which == 1) kiln::gemm_serial(dx, dy.data(), w.data(), dx_whole.data());
    });
  };
  kiln::profile::AlternateOptions alternation;
  alternation.rounds = options.rounds;
  alternation.calls = 50;
  kiln::profile::Alternation pairs =
      kiln::profile::alternate(side_by_side, one_after_the_other, alternation);
  std::printf("\n## dW (512x512, K=128) and dX (128x512, K=512) of one 512x512 layer, %d threads\n",
              options.threads);
  std::printf("bits: dW %s, dX %s (whole GEMM vs kiln's blocks)\n",
              same_bits(dw_whole, dw_blocked) ? "identical" : "DIFFER",
              same_bits(dx_whole, dx_blocked) ? "identical" : "DIFFER");
  std::printf("one after the other (blocked): %.3f ms; side by side (one thread each): %.3f ms\n",
              kiln::profile::median(pairs.b_s) * 1e3, kiln::profile::median(pairs.a_s) * 1e3);
  std::printf("gain per round: %s (median %.2fx)\n",
              kiln::profile::format_ratios(pairs.ratios()).c_str(), pairs.median_ratio());
}

}  // namespace

int main(int argc, char** argv) {
  Options options = parse(argc, argv);
  if (options.pair) {
    run_pair(options);
    return 0;
  }
  const dnnl_version_t* version = dnnl_version();
  std::printf("# gemm_choice: threads=%d rounds=%d min-time=%.2fs quiet=%dms blocks=%s\n",
              options.threads, options.rounds, options.min_time, options.quiet_ms,
              options.blocks > 0 ? std::to_string(options.blocks).c_str() : "kiln");
  std::printf("# oneDNN %d.%d.%d (cpu runtime %u); OpenBLAS %s [%s]; cores %u; loadavg %.2f\n",
              version->major, version->minor, version->patch, version->cpu_runtime,
              openblas_get_corename(), openblas_get_config(), std::thread::hardware_concurrency(),
              load_average());
  std::vector<Variant> variants = make_variants(options);
  std::mt19937 rng(1);

  for (const GemmShape& shape : kShapes) {
    if (options.only != nullptr && std::strstr(shape.name, options.only) == nullptr) continue;
    GemmDims d = dims_of(shape);
    std::vector<float> a = random_matrix(static_cast<size_t>(d.m * d.k), rng);
    std::vector<float> b = random_matrix(static_cast<size_t>(d.k * d.n), rng);
    std::vector<float> c(static_cast<size_t>(d.m * d.n));
    double flops = 2.0 * static_cast<double>(d.m * d.n * d.k);
    GemmBlocks blocks = blocks_for(d, options);
    std::printf("\n## %s  (M=%ld N=%ld K=%ld %c%c; kiln blocks: %ld x %ld %s)\n", shape.name,
                static_cast<long>(d.m), static_cast<long>(d.n), static_cast<long>(d.k),
                d.trans_a ? 'T' : 'N', d.trans_b ? 'T' : 'N', static_cast<long>(blocks.count),
                static_cast<long>(blocks.size), blocks.split_m ? "rows" : "columns");

    // Determinism: the same inputs with 1..16 threads (twice at 2) must give the same bits.
    std::vector<std::string> determinism(variants.size());
    for (size_t v = 0; v < variants.size(); ++v) {
      std::vector<float> first(c.size());
      variants[v].run(1, d, a.data(), b.data(), first.data());
      std::string verdict = "identical for 1,2,2,3,4,8,16 threads";
      for (int t : {2, 2, 3, 4, 8, 16}) {
        std::vector<float> other(c.size());
        variants[v].run(t, d, a.data(), b.data(), other.data());
        if (!same_bits(first, other)) {
          char text[128];
          std::snprintf(text, sizeof text, "DIFFERS at %d threads (max rel diff %.2g)", t,
                        max_rel_diff(first, other));
          verdict = text;
          break;
        }
      }
      determinism[v] = verdict;
    }

    // Timing: rounds alternate the variants' order (forward, then backward); each variant
    // starts after a pause so a previous library's spinning threads have gone to sleep.
    std::vector<std::vector<double>> gflops(variants.size());
    if (options.timing) {
      for (auto& variant : variants) variant.run(options.threads, d, a.data(), b.data(), c.data());
      for (int round = 0; round < options.rounds; ++round) {
        for (size_t i = 0; i < variants.size(); ++i) {
          size_t v = round % 2 == 0 ? i : variants.size() - 1 - i;
          std::this_thread::sleep_for(std::chrono::milliseconds(options.quiet_ms));
          variants[v].run(options.threads, d, a.data(), b.data(), c.data());
          int64_t calls = 0;
          auto start = std::chrono::steady_clock::now();
          double elapsed = 0;
          do {
            variants[v].run(options.threads, d, a.data(), b.data(), c.data());
            ++calls;
            elapsed = seconds_since(start);
          } while (elapsed < options.min_time);
          gflops[v].push_back(flops * static_cast<double>(calls) / elapsed / 1e9);
        }
      }
    }
    double base = options.timing ? median(gflops[0]) : 0;
    std::printf("%-22s %9s %17s %9s %10s  %s\n", "variant", "GFLOP/s", "(min-max)", "vs onednn",
                "us/call", "thread-count check");
    for (size_t v = 0; v < variants.size(); ++v) {
      if (options.timing) {
        double med = median(gflops[v]);
        auto [lo, hi] = std::minmax_element(gflops[v].begin(), gflops[v].end());
        std::printf("%-22s %9.1f (%7.1f-%7.1f) %9.2f %10.1f  %s\n", variants[v].name.c_str(), med,
                    *lo, *hi, med / base, flops / med / 1e3, determinism[v].c_str());
      } else {
        std::printf("%-22s %9s %17s %9s %10s  %s\n", variants[v].name.c_str(), "-", "-", "-", "-",
                    determinism[v].c_str());
      }
    }
    std::fflush(stdout);
  }
  std::printf("\n# loadavg at the end %.2f\n", load_average());
  return 0;
}
