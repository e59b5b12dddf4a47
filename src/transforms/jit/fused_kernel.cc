// The fused elementwise loop (see fused_kernel.h).
#include "transforms/jit/fused_kernel.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <map>
#include <optional>

#include "kernels/cpu/elementwise_simd.h"
#include "kernels/cpu/vector_ops.h"

namespace kiln::detail {
namespace {

// Elements per tile: every live tile of a group of a dozen f32 members fits in a 256 KiB
// share of L2 cache, and a member's kernel call is amortised over enough elements.
constexpr int64_t kTileElements = 2048;
// Elements per parallel chunk (a run of tiles on one thread); from the size alone, so
// chunking does not depend on the thread count (results would not anyway: elementwise).
constexpr int64_t kChunkElements = 32768;
// Results at least this long are stored with non-temporal stores (the eager kernels' rule).
constexpr int64_t kStreamResultElements = int64_t{1} << 15;

// Row-major strides of `shape`, with 0 for size-1 axes (they broadcast).
std::vector<int64_t> broadcast_strides(const Shape& shape) {
  std::vector<int64_t> strides(static_cast<size_t>(shape.rank()), 0);
  int64_t stride = 1;
  for (int64_t axis = shape.rank() - 1; axis >= 0; --axis) {
    strides[static_cast<size_t>(axis)] = shape[axis] == 1 ? 0 : stride;
    stride *= shape[axis];
  }
  return strides;
}

// Writes `count` copies of the element at `from` (of `item` bytes) to `out`.
void repeat_element(const std::byte* from, int64_t item, int64_t count, std::byte* out) {
  auto fill = [&](auto tag) {
    using Word = decltype(tag);
    Word value;
    std::memcpy(&value, from, sizeof(Word));
    auto* words = reinterpret_cast<Word*>(out);  // tiles are aligned; rows of them by item
    std::fill(words, words + count, value);
  };
  switch (item) {
    case 1:
      return fill(uint8_t{});
    case 2:
      return fill(uint16_t{});
    case 4:
      return fill(uint32_t{});
    case 8:
      return fill(uint64_t{});
    default:
      for (int64_t i = 0; i < count; ++i)
        std::memcpy(out + i * item, from, static_cast<size_t>(item));
  }
}

// Copies elements [begin, end) of `source` broadcast to `shape` (by `strides`) into `tile`,
// one run along the last axis at a time: a run is a contiguous copy (stride 1) or one
// element repeated (stride 0).
void expand_into(const std::byte* source, const std::vector<int64_t>& strides, const Shape& shape,
                 int64_t item, int64_t begin, int64_t end, std::byte* tile) {
  const auto rank = static_cast<size_t>(shape.rank());
  if (rank == 0) {
    std::memcpy(tile, source, static_cast<size_t>(item));
    return;
  }
  std::vector<int64_t> index(rank, 0);
  int64_t offset = 0;  // of the element at `begin`, in elements of source
  for (size_t axis = rank, rest = static_cast<size_t>(begin); axis-- > 0;) {
    auto size = static_cast<size_t>(shape[static_cast<int64_t>(axis)]);
    index[axis] = static_cast<int64_t>(rest % size);
    rest /= size;
    offset += index[axis] * strides[axis];
  }
  const size_t last = rank - 1;
  const int64_t row = shape[static_cast<int64_t>(last)];
  const int64_t last_stride = strides[last];
  std::byte* out = tile;
  for (int64_t k = begin; k < end;) {
    const int64_t run = std::min(row - index[last], end - k);
    const std::byte* from = source + offset * item;
    if (last_stride == 0) {
      repeat_element(from, item, run, out);
    } else {  // stride 1: the operand's own row
      std::memcpy(out, from, static_cast<size_t>(run * item));
    }
    out += run * item;
    k += run;
    // Next run: the start of the next row.
    offset += (run)*last_stride;
    index[last] += run;
    for (size_t axis = last + 1; axis-- > 0;) {
      if (index[axis] < shape[static_cast<int64_t>(axis)] || axis == 0) break;
      offset -= strides[axis] * index[axis];
      index[axis] = 0;
      offset += strides[axis - 1];
      ++index[axis - 1];
    }
  }
}

// Which vector loop the member's eager kernel would run, if it is the fast kernel of a
// primitive with one and the operands are f32 or f64.
void choose_vector_loop(const Equation& equation, const Program& program, KernelFn kernel,
                        FusedMember& member) {
  if (kernel == nullptr || kernel != prim_def(equation.prim).cpu_kernel) return;
  DType dtype = program.aval(equation.outputs[0]).dtype;
  if (dtype != DType::f32 && dtype != DType::f64) return;
  if (auto op = vector_unary_op(equation.prim)) {
    member.vector =
        dtype == DType::f32 ? FusedMember::Vector::kUnaryF32 : FusedMember::Vector::kUnaryF64;
    member.vector_op = static_cast<uint8_t>(*op);
  } else if (auto op2 = vector_binary_op(equation.prim)) {
    member.vector =
        dtype == DType::f32 ? FusedMember::Vector::kBinaryF32 : FusedMember::Vector::kBinaryF64;
    member.vector_op = static_cast<uint8_t>(*op2);
  }
}

// Bytes of one program tile: a dozen live tiles stay within L1 cache.
constexpr int64_t kProgramTileBytes = 2048;

// The group as one straight-line program, or nothing when a member is not a plain vector
// op of the group's float dtype (comparisons, selects, broadcasts, integer ops...).
std::optional<FusedProgram> build_program(const FusedLoop& loop) {
  FusedProgram program;
  const FusedMember::Vector first = loop.members[0].vector;
  if (first == FusedMember::Vector::kUnaryF32 || first == FusedMember::Vector::kBinaryF32) {
    program.dtype = DType::f32;
  } else if (first == FusedMember::Vector::kUnaryF64 || first == FusedMember::Vector::kBinaryF64) {
    program.dtype = DType::f64;
  } else {
    return std::nullopt;
  }
  const bool f32 = program.dtype == DType::f32;
  for (const FusedMember& member : loop.members) {
    const bool is_unary =
        member.vector == (f32 ? FusedMember::Vector::kUnaryF32 : FusedMember::Vector::kUnaryF64);
    const bool is_binary =
        member.vector == (f32 ? FusedMember::Vector::kBinaryF32 : FusedMember::Vector::kBinaryF64);
    if (!is_unary && !is_binary) return std::nullopt;
    if (member.result_tiles.size() != 1) return std::nullopt;
    for (const FusedOperand& operand : member.operands) {
      if (operand.kind == FusedOperand::Kind::kExpanded) return std::nullopt;
    }
  }
  const auto num_externals = static_cast<int64_t>(loop.externals.size());
  const auto num_exports = static_cast<int64_t>(loop.exports.size());
  program.external_scalar.assign(loop.externals.size(), false);
  // The last member that reads each tile, so that its slot can be reused after it.
  std::vector<int64_t> last_reader(loop.tile_dtypes.size(), -1);
  for (size_t m = 0; m < loop.members.size(); ++m) {
    for (const FusedOperand& operand : loop.members[m].operands) {
      if (operand.kind == FusedOperand::Kind::kTile)
        last_reader[static_cast<size_t>(operand.tile)] = static_cast<int64_t>(m);
      if (operand.kind == FusedOperand::Kind::kScalar)
        program.external_scalar[static_cast<size_t>(operand.source)] = true;
    }
  }
  const bool stream = loop.shape.num_elements() >= kStreamResultElements;
  std::vector<int64_t> slot_of_tile(loop.tile_dtypes.size(), -1);
  std::vector<bool> tile_slot_busy;
  auto allocate = [&] {
    auto free_slot = std::find(tile_slot_busy.begin(), tile_slot_busy.end(), false);
    auto index = static_cast<int64_t>(free_slot - tile_slot_busy.begin());
    if (free_slot == tile_slot_busy.end()) tile_slot_busy.push_back(true);
    tile_slot_busy[static_cast<size_t>(index)] = true;
    return num_externals + num_exports + index;
  };
  auto release = [&](int64_t slot) {
    tile_slot_busy[static_cast<size_t>(slot - num_externals - num_exports)] = false;
  };
  auto slot_of = [&](const FusedOperand& operand) {
    return operand.kind == FusedOperand::Kind::kTile
               ? slot_of_tile[static_cast<size_t>(operand.tile)]
               : operand.source;
  };
  auto exported = [&](int64_t tile) {
    return std::any_of(loop.exports.begin(), loop.exports.end(),
                       [&](const auto& entry) { return entry.first == tile; });
  };
  std::vector<simd::ProgramStep> copies;
  for (size_t m = 0; m < loop.members.size(); ++m) {
    const FusedMember& member = loop.members[m];
    simd::ProgramStep step;
    step.op = member.vector_op;
    step.binary = member.operands.size() == 2;
    step.a = static_cast<uint16_t>(slot_of(member.operands[0]));
    step.a_scalar = member.operands[0].kind == FusedOperand::Kind::kScalar;
    if (step.binary) {
      step.b = static_cast<uint16_t>(slot_of(member.operands[1]));
      step.b_scalar = member.operands[1].kind == FusedOperand::Kind::kScalar;
    }
    const int64_t tile = member.result_tiles[0];
    int64_t export_index = -1;
    for (size_t j = 0; j < loop.exports.size(); ++j) {
      if (loop.exports[j].first == tile) export_index = static_cast<int64_t>(j);
    }
    const bool read_later = last_reader[static_cast<size_t>(tile)] > static_cast<int64_t>(m);
    const bool last = m + 1 == loop.members.size();
    if (export_index >= 0 && last && !read_later) {  // straight to memory
      step.y = static_cast<uint16_t>(num_externals + export_index);
      step.stream = stream;
    } else {  // into a tile (allocated before the operands' tiles free: never in place)
      int64_t slot = allocate();
      slot_of_tile[static_cast<size_t>(tile)] = slot;
      step.y = static_cast<uint16_t>(slot);
      if (export_index >= 0) {
        simd::ProgramStep copy;
        copy.op = static_cast<uint8_t>(simd::UnaryOp::kCopy);
        copy.a = step.y;
        copy.y = static_cast<uint16_t>(num_externals + export_index);
        copy.stream = stream;
        copies.push_back(copy);
      }
    }
    program.steps.push_back(step);
    auto release_if_done = [&](int64_t t) {
      int64_t& slot = slot_of_tile[static_cast<size_t>(t)];
      if (slot >= 0 && last_reader[static_cast<size_t>(t)] <= static_cast<int64_t>(m) &&
          !exported(t)) {
        release(slot);
        slot = -1;
      }
    };
    for (const FusedOperand& operand : member.operands) {
      if (operand.kind == FusedOperand::Kind::kTile) release_if_done(operand.tile);
    }
    release_if_done(tile);  // a result nothing reads
  }
  // Results go out to memory only after every step has read its operands: the memory
  // plan may have put a result over an operand that a later step still reads.
  program.steps.insert(program.steps.end(), copies.begin(), copies.end());
  program.num_tiles = static_cast<int64_t>(tile_slot_busy.size());
  // Slots are numbered in 16 bits; a group that needs more runs member by member.
  if (num_externals + num_exports + program.num_tiles > std::numeric_limits<uint16_t>::max())
    return std::nullopt;
  return program;
}

}  // namespace

FusedLoop FusedLoop::build(const Program& program, std::span<const size_t> equations,
                           std::span<const KernelFn> kernels,
                           const std::function<bool(VarId)>& in_memory) {
  FusedLoop loop;
  loop.shape = program.aval(program.equations[equations[0]].outputs[0]).shape;
  std::map<VarId, int64_t> tile_of;      // member results
  std::map<VarId, int64_t> external_of;  // values read from memory
  auto new_tile = [&](DType dtype) {
    loop.tile_dtypes.push_back(dtype);
    return static_cast<int64_t>(loop.tile_dtypes.size() - 1);
  };
  auto external = [&](VarId var) {
    auto [it, inserted] = external_of.emplace(var, static_cast<int64_t>(loop.externals.size()));
    if (inserted) loop.externals.push_back(var);
    return it->second;
  };
  for (size_t index : equations) {
    const Equation& equation = program.equations[index];
    FusedMember member;
    member.params = &equation.params;
    if (equation.prim == PrimId::broadcast_in_dim) {
      // Axis i of the operand is axis broadcast_dimensions[i] of the result.
      const auto& p = std::get<BroadcastInDimParams>(equation.params);
      const AbstractValue& operand = program.aval(equation.inputs[0]);
      std::vector<int64_t> operand_strides = broadcast_strides(operand.shape);
      FusedOperand source;
      source.kind = FusedOperand::Kind::kExpanded;
      source.dtype = operand.dtype;
      source.source = external(equation.inputs[0]);
      source.strides.assign(static_cast<size_t>(loop.shape.rank()), 0);
      for (size_t i = 0; i < p.broadcast_dimensions.size(); ++i) {
        source.strides[static_cast<size_t>(p.broadcast_dimensions[i])] = operand_strides[i];
      }
      member.operands.push_back(std::move(source));
    } else {
      member.kernel = kernels[index];
      choose_vector_loop(equation, program, member.kernel, member);
      for (VarId in : equation.inputs) {
        const AbstractValue& aval = program.aval(in);
        FusedOperand operand;
        operand.dtype = aval.dtype;
        if (auto found = tile_of.find(in); found != tile_of.end()) {
          operand.kind = FusedOperand::Kind::kTile;
          operand.tile = found->second;
        } else if (aval.num_elements() == 1) {
          operand.kind = FusedOperand::Kind::kScalar;
          operand.source = external(in);
        } else if (aval.shape == loop.shape) {
          operand.source = external(in);
        } else {
          operand.kind = FusedOperand::Kind::kExpanded;
          operand.source = external(in);
          operand.strides = broadcast_strides(aval.shape);
          operand.tile = new_tile(aval.dtype);
        }
        member.operands.push_back(std::move(operand));
      }
    }
    for (VarId out : equation.outputs) {
      DType dtype = program.aval(out).dtype;
      int64_t tile = new_tile(dtype);
      tile_of[out] = tile;
      member.result_tiles.push_back(tile);
      member.result_dtypes.push_back(dtype);
      if (in_memory(out)) loop.exports.emplace_back(tile, out);
    }
    loop.members.push_back(std::move(member));
  }
  // The last member's result goes straight to memory when it is exported.
  FusedMember& last = loop.members.back();
  if (last.result_tiles.size() == 1 && last.kernel != nullptr) {
    for (size_t j = 0; j < loop.exports.size(); ++j) {
      if (loop.exports[j].first == last.result_tiles[0])
        last.direct_export = static_cast<int64_t>(j);
    }
  }
  loop.program = build_program(loop);
  return loop;
}

void FusedLoop::run_program(std::span<const void* const> external_data,
                            std::span<void* const> export_data, ComputePool& pool) const {
  const int64_t n = shape.num_elements();
  const int64_t item = dtype_size(program->dtype);
  const int64_t block = kProgramTileBytes / item;
  const size_t num_externals = externals.size();
  const size_t num_exports = exports.size();
  const size_t num_slots = num_externals + num_exports + static_cast<size_t>(program->num_tiles);
  // A result written over one of the loop's own operands (the memory plan puts results in
  // place) is stored normally: its lines are in cache, having just been read, and a
  // non-temporal store would first have to evict them.
  std::vector<simd::ProgramStep> in_place_steps;
  const simd::ProgramStep* steps = program->steps.data();
  for (size_t j = 0; j < num_exports; ++j) {
    if (std::find(external_data.begin(), external_data.end(), export_data[j]) ==
        external_data.end())
      continue;
    if (in_place_steps.empty()) in_place_steps = program->steps;
    for (simd::ProgramStep& step : in_place_steps) {
      if (step.y == num_externals + j) step.stream = false;
    }
    steps = in_place_steps.data();
  }
  const int64_t chunks = chunk_count(n, kChunkElements);
  pool.parallel_for(chunks, [&](int64_t chunk) {
    thread_local std::vector<std::byte> scratch_storage;
    thread_local std::vector<void*> slots;
    const auto scratch_bytes = static_cast<size_t>(program->num_tiles * kProgramTileBytes + 64);
    if (scratch_storage.size() < scratch_bytes) scratch_storage.resize(scratch_bytes);
    slots.resize(num_slots);
    auto base = reinterpret_cast<uintptr_t>(scratch_storage.data());
    auto* scratch = reinterpret_cast<std::byte*>((base + 63) / 64 * 64);
    for (int64_t t = 0; t < program->num_tiles; ++t)
      slots[num_externals + num_exports + static_cast<size_t>(t)] = scratch + t * kProgramTileBytes;
    const int64_t chunk_begin = n * chunk / chunks, chunk_end = n * (chunk + 1) / chunks;
    for (int64_t begin = chunk_begin; begin < chunk_end; begin += block) {
      const auto length = static_cast<size_t>(std::min(block, chunk_end - begin));
      for (size_t i = 0; i < num_externals; ++i) {
        auto* data = static_cast<std::byte*>(const_cast<void*>(external_data[i]));
        slots[i] = program->external_scalar[i] ? data : data + begin * item;
      }
      for (size_t j = 0; j < num_exports; ++j)
        slots[num_externals + j] = static_cast<std::byte*>(export_data[j]) + begin * item;
      if (program->dtype == DType::f32) {
        simd::run_program_f32(steps, program->steps.size(), slots.data(), length);
      } else {
        simd::run_program_f64(steps, program->steps.size(), slots.data(), length);
      }
    }
    simd::flush_streams();  // the streamed results are complete before the chunk ends
  });
}

void FusedLoop::run(std::span<const void* const> external_data, std::span<void* const> export_data,
                    ComputePool& pool) const {
  if (program) return run_program(external_data, export_data, pool);
  const int64_t n = shape.num_elements();
  // Tile buffers, 64-byte aligned, one after another in a per-thread scratch block.
  std::vector<int64_t> tile_offset(tile_dtypes.size());
  int64_t scratch_bytes = 0;
  for (size_t t = 0; t < tile_dtypes.size(); ++t) {
    tile_offset[t] = scratch_bytes;
    scratch_bytes += (kTileElements * dtype_size(tile_dtypes[t]) + 63) / 64 * 64;
  }
  const int64_t chunks = chunk_count(n, kChunkElements);
  pool.parallel_for(chunks, [&](int64_t chunk) {
    thread_local std::vector<std::byte> scratch_storage;
    if (static_cast<int64_t>(scratch_storage.size()) < scratch_bytes + 64) {
      scratch_storage.resize(static_cast<size_t>(scratch_bytes + 64));
    }
    auto base = reinterpret_cast<uintptr_t>(scratch_storage.data());
    auto* scratch = reinterpret_cast<std::byte*>((base + 63) / 64 * 64);
    auto tile_data = [&](int64_t tile) { return scratch + tile_offset[static_cast<size_t>(tile)]; };

    std::vector<AbstractValue> input_avals, output_avals;
    std::vector<KernelInput> inputs;
    std::vector<KernelOutput> outputs;
    const int64_t chunk_begin = n * chunk / chunks, chunk_end = n * (chunk + 1) / chunks;
    for (int64_t begin = chunk_begin; begin < chunk_end; begin += kTileElements) {
      const int64_t end = std::min(begin + kTileElements, chunk_end);
      const int64_t length = end - begin;
      for (const FusedMember& member : members) {
        if (member.kernel == nullptr) {  // broadcast_in_dim: expand into the result tile
          const FusedOperand& operand = member.operands[0];
          expand_into(
              static_cast<const std::byte*>(external_data[static_cast<size_t>(operand.source)]),
              operand.strides, shape, dtype_size(operand.dtype), begin, end,
              tile_data(member.result_tiles[0]));
          continue;
        }
        // Operand data for this tile (and whether it is one repeated element).
        const void* operand_data[3] = {nullptr, nullptr, nullptr};
        bool operand_scalar[3] = {false, false, false};
        auto operand_at = [&](const FusedOperand& operand, size_t slot) {
          const int64_t item = dtype_size(operand.dtype);
          switch (operand.kind) {
            case FusedOperand::Kind::kTile:
              operand_data[slot] = tile_data(operand.tile);
              break;
            case FusedOperand::Kind::kDirect:
              operand_data[slot] = static_cast<const std::byte*>(
                                       external_data[static_cast<size_t>(operand.source)]) +
                                   begin * item;
              break;
            case FusedOperand::Kind::kScalar:
              operand_data[slot] = external_data[static_cast<size_t>(operand.source)];
              operand_scalar[slot] = true;
              break;
            case FusedOperand::Kind::kExpanded:
              expand_into(
                  static_cast<const std::byte*>(external_data[static_cast<size_t>(operand.source)]),
                  operand.strides, shape, item, begin, end, tile_data(operand.tile));
              operand_data[slot] = tile_data(operand.tile);
              break;
          }
        };
        void* result_data =
            member.direct_export >= 0
                ? static_cast<void*>(static_cast<std::byte*>(
                                         export_data[static_cast<size_t>(member.direct_export)]) +
                                     begin * dtype_size(member.result_dtypes[0]))
                : static_cast<void*>(tile_data(member.result_tiles[0]));
        // A long result written straight to memory streams past the caches, as the eager
        // kernel's stores do for it: nothing reads it back soon.
        const simd::Store store = member.direct_export >= 0 && n >= kStreamResultElements
                                      ? simd::Store::kStream
                                      : simd::Store::kAuto;
        if (member.vector != FusedMember::Vector::kNone) {
          for (size_t i = 0; i < member.operands.size(); ++i) operand_at(member.operands[i], i);
          auto count = static_cast<size_t>(length);
          auto stride = [&](size_t slot) { return operand_scalar[slot] ? size_t{0} : size_t{1}; };
          switch (member.vector) {
            case FusedMember::Vector::kUnaryF32:
              simd::unary_f32(static_cast<simd::UnaryOp>(member.vector_op),
                              static_cast<const float*>(operand_data[0]),
                              static_cast<float*>(result_data), count, store);
              break;
            case FusedMember::Vector::kUnaryF64:
              simd::unary_f64(static_cast<simd::UnaryOp>(member.vector_op),
                              static_cast<const double*>(operand_data[0]),
                              static_cast<double*>(result_data), count, store);
              break;
            case FusedMember::Vector::kBinaryF32:
              simd::binary_f32(static_cast<simd::BinaryOp>(member.vector_op),
                               static_cast<const float*>(operand_data[0]), stride(0),
                               static_cast<const float*>(operand_data[1]), stride(1),
                               static_cast<float*>(result_data), count, store);
              break;
            case FusedMember::Vector::kBinaryF64:
              simd::binary_f64(static_cast<simd::BinaryOp>(member.vector_op),
                               static_cast<const double*>(operand_data[0]), stride(0),
                               static_cast<const double*>(operand_data[1]), stride(1),
                               static_cast<double*>(result_data), count, store);
              break;
            case FusedMember::Vector::kNone:
              break;
          }
          continue;
        }
        input_avals.clear();
        inputs.clear();
        input_avals.reserve(member.operands.size());
        for (const FusedOperand& operand : member.operands) {
          const int64_t item = dtype_size(operand.dtype);
          const void* data = nullptr;
          int64_t count = length;
          switch (operand.kind) {
            case FusedOperand::Kind::kTile:
              data = tile_data(operand.tile);
              break;
            case FusedOperand::Kind::kDirect:
              data = static_cast<const std::byte*>(
                         external_data[static_cast<size_t>(operand.source)]) +
                     begin * item;
              break;
            case FusedOperand::Kind::kScalar:
              data = external_data[static_cast<size_t>(operand.source)];
              count = 1;
              break;
            case FusedOperand::Kind::kExpanded:
              expand_into(
                  static_cast<const std::byte*>(external_data[static_cast<size_t>(operand.source)]),
                  operand.strides, shape, item, begin, end, tile_data(operand.tile));
              data = tile_data(operand.tile);
              break;
          }
          input_avals.emplace_back(Shape{count}, operand.dtype);
          inputs.push_back({data, nullptr});
        }
        for (size_t i = 0; i < inputs.size(); ++i) inputs[i].aval = &input_avals[i];
        output_avals.clear();
        outputs.clear();
        output_avals.reserve(member.result_tiles.size());
        for (size_t r = 0; r < member.result_tiles.size(); ++r) {
          output_avals.emplace_back(Shape{length}, member.result_dtypes[r]);
          outputs.push_back({r == 0 ? result_data : tile_data(member.result_tiles[r]), nullptr});
        }
        for (size_t r = 0; r < outputs.size(); ++r) outputs[r].aval = &output_avals[r];
        member.kernel(KernelCall{inputs, outputs, *member.params, pool});
      }
      for (size_t j = 0; j < exports.size(); ++j) {
        if (static_cast<int64_t>(j) == members.back().direct_export) continue;
        int64_t tile = exports[j].first;
        int64_t item = dtype_size(tile_dtypes[static_cast<size_t>(tile)]);
        std::memcpy(static_cast<std::byte*>(export_data[j]) + begin * item, tile_data(tile),
                    static_cast<size_t>(length * item));
      }
    }
  });
}

}  // namespace kiln::detail
