// The fused elementwise loop (see fused_kernel.h).
#include "jit/fused_kernel.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <map>
#include <optional>

#include "jit/kernel_error.h"
#include "kernels/cpu/elementwise_simd.h"
#include "kernels/cpu/vector_ops.h"
#include "prims/ids/select.h"
#include "prims/ids/shape.h"

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
// primitive with one and the operands are f32 or f64 (comparisons and selects: the loop a
// fused program runs for them).
void choose_vector_loop(const Equation& equation, const Program& program, KernelFn kernel,
                        FusedMember& member) {
  if (kernel == nullptr || kernel != prim_def(equation.prim).cpu_kernel) return;
  auto is_float = [](DType dtype) { return dtype == DType::f32 || dtype == DType::f64; };
  if (auto op = vector_compare_op(equation.prim)) {
    if (!is_float(program.aval(equation.inputs[0]).dtype)) return;
    member.vector = FusedMember::Vector::kCompare;
    member.vector_op = static_cast<uint8_t>(*op);
    return;
  }
  DType dtype = program.aval(equation.outputs[0]).dtype;
  if (!is_float(dtype)) return;
  if (equation.prim == prim::select) {
    member.vector = FusedMember::Vector::kSelect;
  } else if (auto op = vector_unary_op(equation.prim)) {
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

// The float type a member computes in (the type of its values; a comparison's operands),
// or nothing when it has no vector loop.
std::optional<DType> value_dtype(const FusedMember& member) {
  using Vector = FusedMember::Vector;
  switch (member.vector) {
    case Vector::kUnaryF32:
    case Vector::kBinaryF32:
      return DType::f32;
    case Vector::kUnaryF64:
    case Vector::kBinaryF64:
      return DType::f64;
    case Vector::kCompare:
      return member.operands[0].dtype;
    case Vector::kSelect:
      return member.result_dtypes[0];
    case Vector::kNone:
      break;
  }
  return std::nullopt;
}

// Whether every operand and result of `member` has the type its vector loop expects in a
// program over `dtype` values.
bool types_fit(const FusedMember& member, DType dtype) {
  auto operands_are = [&](size_t first, DType type) {
    for (size_t i = first; i < member.operands.size(); ++i) {
      if (member.operands[i].dtype != type) return false;
    }
    return true;
  };
  if (member.vector == FusedMember::Vector::kCompare)
    return operands_are(0, dtype) && member.result_dtypes[0] == DType::bool_;
  if (member.vector == FusedMember::Vector::kSelect)
    return member.operands[0].dtype == DType::bool_ && operands_are(1, dtype) &&
           member.result_dtypes[0] == dtype;
  return operands_are(0, dtype) && member.result_dtypes[0] == dtype;
}

// The float type of a program for the group: every member's vector loop computes in it and
// every operand is of it (or bool), or nothing when some member does not fit.
std::optional<DType> program_dtype(const FusedLoop& loop) {
  std::optional<DType> dtype;
  for (const FusedMember& member : loop.members) {
    if (member.kernel == nullptr) continue;  // a broadcast: its operand's type is checked below
    std::optional<DType> own = value_dtype(member);
    if (!own || (dtype && *dtype != *own) || member.result_tiles.size() != 1) return std::nullopt;
    dtype = own;
    if (!types_fit(member, *dtype)) return std::nullopt;
  }
  if (!dtype) return std::nullopt;
  for (const FusedMember& member : loop.members) {
    for (const FusedOperand& operand : member.operands) {
      if (operand.dtype != *dtype && operand.dtype != DType::bool_) return std::nullopt;
    }
  }
  return dtype;
}

// Per external: its element size and whether it is one element read whole; per export:
// its element size.
void lay_out_memory(const FusedLoop& loop, FusedProgram& program) {
  program.external_scalar.assign(loop.externals.size(), false);
  program.external_item.assign(loop.externals.size(), 0);
  for (const FusedMember& member : loop.members) {
    for (const FusedOperand& operand : member.operands) {
      if (operand.kind != FusedOperand::Kind::kTile)
        program.external_item[static_cast<size_t>(operand.source)] = dtype_size(operand.dtype);
      if (operand.kind == FusedOperand::Kind::kScalar)
        program.external_scalar[static_cast<size_t>(operand.source)] = true;
    }
  }
  for (const auto& [tile, var] : loop.exports)
    program.export_item.push_back(dtype_size(loop.tile_dtypes[static_cast<size_t>(tile)]));
}

// Tile slots, numbered after the `first` slots of externals and exports: the lowest free
// one is taken, so a dead tile's slot is the next result's.
class SlotAllocator {
 public:
  explicit SlotAllocator(int64_t first) : first_(first) {}
  // A permanent slot is never given back.
  int64_t take(bool permanent) {
    auto free_slot = std::find(busy_.begin(), busy_.end(), false);
    auto index = static_cast<size_t>(free_slot - busy_.begin());
    if (free_slot == busy_.end()) {
      busy_.push_back(true);
      permanent_.push_back(false);
    }
    busy_[index] = true;
    permanent_[index] = permanent;
    return first_ + static_cast<int64_t>(index);
  }
  void give_back(int64_t slot) {
    auto index = static_cast<size_t>(slot - first_);
    if (!permanent_[index]) busy_[index] = false;
  }
  int64_t count() const { return static_cast<int64_t>(busy_.size()); }

 private:
  int64_t first_;
  std::vector<bool> busy_;
  std::vector<bool> permanent_;
};

// allocate_slots' walk over the members, with the slot each tile is in so far.
class SlotAssigner {
 public:
  SlotAssigner(const FusedLoop& loop, const TileUses& uses)
      : loop_(loop),
        uses_(uses),
        allocator_(static_cast<int64_t>(loop.externals.size() + loop.exports.size())),
        slot_of_tile_(loop.tile_dtypes.size(), -1),
        scalar_tile_(loop.tile_dtypes.size(), false) {
    slots_.members.resize(loop.members.size());
  }

  ProgramSlots assign() && {
    for (size_t m = 0; m < loop_.members.size(); ++m) place_expansions(m);
    for (size_t m = 0; m < loop_.members.size(); ++m) {
      if (loop_.members[m].kernel == nullptr) {
        place_broadcast(m);
      } else {
        place_step(m);
      }
    }
    slots_.num_tiles = allocator_.count();
    return std::move(slots_);
  }

 private:
  // A member's expanded operands get their slots, and so does a broadcast's operand,
  // except that a broadcast of a single element needs none when every reader has a
  // repeated-element form: its tile is then the element itself.
  void place_expansions(size_t m) {
    const FusedMember& member = loop_.members[m];
    ProgramSlots::Member& placed = slots_.members[m];
    placed.operands.assign(member.operands.size(), -1);
    placed.scalar.assign(member.operands.size(), false);
    if (member.kernel == nullptr) {
      const auto tile = static_cast<size_t>(member.result_tiles[0]);
      const FusedOperand& operand = member.operands[0];
      const bool single = std::all_of(operand.strides.begin(), operand.strides.end(),
                                      [](int64_t stride) { return stride == 0; });
      if (single && uses_.export_of[tile] < 0 && !uses_.read_as_run[tile]) {
        slots_.scalar_externals.push_back(operand.source);
        slot_of_tile_[tile] = operand.source;
        scalar_tile_[tile] = true;
        placed.result = operand.source;
        placed.result_scalar = true;
      } else {
        placed.operands[0] = expansion(operand);
      }
      return;
    }
    for (size_t i = 0; i < member.operands.size(); ++i) {
      if (member.operands[i].kind == FusedOperand::Kind::kExpanded)
        placed.operands[i] = expansion(member.operands[i]);
    }
  }

  int64_t expansion(const FusedOperand& operand) {
    FusedProgram::Expansion expanded;
    expanded.source = operand.source;
    expanded.strides = operand.strides;
    expanded.item = dtype_size(operand.dtype);
    const bool row_only = !operand.strides.empty() && operand.strides.back() == 1 &&
                          std::all_of(operand.strides.begin(), operand.strides.end() - 1,
                                      [](int64_t stride) { return stride == 0; });
    if (row_only) expanded.row = loop_.shape[loop_.shape.rank() - 1];
    expanded.slot = static_cast<uint16_t>(allocator_.take(true));
    slots_.expansions.push_back(expanded);
    return static_cast<int64_t>(expanded.slot);
  }

  // A broadcast has no step: readers find its tile in its expansion's slot.
  void place_broadcast(size_t m) {
    ProgramSlots::Member& placed = slots_.members[m];
    if (placed.result_scalar) return;
    placed.result = placed.operands[0];
    slot_of_tile_[static_cast<size_t>(loop_.members[m].result_tiles[0])] = placed.result;
  }

  void place_step(size_t m) {
    const FusedMember& member = loop_.members[m];
    ProgramSlots::Member& placed = slots_.members[m];
    for (size_t i = 0; i < member.operands.size(); ++i) {
      const FusedOperand& operand = member.operands[i];
      switch (operand.kind) {
        case FusedOperand::Kind::kTile:
          placed.operands[i] = slot_of_tile_[static_cast<size_t>(operand.tile)];
          placed.scalar[i] = scalar_tile_[static_cast<size_t>(operand.tile)];
          break;
        case FusedOperand::Kind::kDirect:
          placed.operands[i] = operand.source;
          break;
        case FusedOperand::Kind::kScalar:
          placed.operands[i] = operand.source;
          placed.scalar[i] = true;
          break;
        case FusedOperand::Kind::kExpanded:  // placed with the expansions
          break;
      }
    }
    const int64_t tile = member.result_tiles[0];
    const int64_t export_index = uses_.export_of[static_cast<size_t>(tile)];
    const bool read_later = uses_.last_reader[static_cast<size_t>(tile)] > static_cast<int64_t>(m);
    if (export_index >= 0 && member.direct_export >= 0 && !read_later) {  // straight to memory
      placed.result = static_cast<int64_t>(loop_.externals.size()) + export_index;
      placed.to_memory = true;
    } else {  // into a tile (taken before the operands' tiles are given back: never in place)
      placed.result = allocator_.take(false);
      slot_of_tile_[static_cast<size_t>(tile)] = placed.result;
    }
    for (const FusedOperand& operand : member.operands) {
      if (operand.kind == FusedOperand::Kind::kTile) release_if_done(operand.tile, m);
    }
    release_if_done(tile, m);  // a result nothing reads
  }

  // Gives back the slot of a tile that no member after m reads and that is not exported.
  void release_if_done(int64_t tile, size_t m) {
    const auto t = static_cast<size_t>(tile);
    int64_t& slot = slot_of_tile_[t];
    if (slot < 0 || scalar_tile_[t]) return;
    if (uses_.last_reader[t] > static_cast<int64_t>(m) || uses_.export_of[t] >= 0) return;
    allocator_.give_back(slot);
    slot = -1;
  }

  const FusedLoop& loop_;
  const TileUses& uses_;
  SlotAllocator allocator_;
  std::vector<int64_t> slot_of_tile_;
  std::vector<bool> scalar_tile_;  // a broadcast single element, read in place
  ProgramSlots slots_;
};

// The step that computes member `member` with its slots `placed`.
simd::ProgramStep member_step(const FusedMember& member, const ProgramSlots::Member& placed,
                              bool stream) {
  using Form = simd::ProgramStep::Form;
  simd::ProgramStep step;
  step.op = member.vector_op;
  switch (member.vector) {
    case FusedMember::Vector::kCompare:
      step.form = Form::kCompare;
      break;
    case FusedMember::Vector::kSelect:
      step.form = Form::kSelect;
      break;
    default:
      step.form = member.operands.size() == 2 ? Form::kBinary : Form::kUnary;
      break;
  }
  uint16_t* const operand_fields[3] = {&step.a, &step.b, &step.c};
  bool* const scalar_fields[3] = {&step.a_scalar, &step.b_scalar, &step.c_scalar};
  for (size_t i = 0; i < member.operands.size(); ++i) {
    *operand_fields[i] = static_cast<uint16_t>(placed.operands[i]);
    *scalar_fields[i] = placed.scalar[i];
  }
  step.y = static_cast<uint16_t>(placed.result);
  step.stream = placed.to_memory && stream && step.form != Form::kCompare;  // bools: no
  return step;
}

// A thread's scratch block of at least `bytes`, 64-byte aligned (one per thread, reused by
// every fused loop that thread runs).
std::byte* aligned_scratch(int64_t bytes) {
  thread_local std::vector<std::byte> storage;
  const auto needed = static_cast<size_t>(bytes + 64);
  if (storage.size() < needed) storage.resize(needed);
  auto base = reinterpret_cast<uintptr_t>(storage.data());
  return reinterpret_cast<std::byte*>((base + 63) / 64 * 64);
}

}  // namespace

TileUses tile_uses(const FusedLoop& loop) {
  const size_t tiles = loop.tile_dtypes.size();
  TileUses uses{std::vector<int64_t>(tiles, -1), std::vector<int64_t>(tiles, -1),
                std::vector<bool>(tiles, false)};
  for (size_t j = 0; j < loop.exports.size(); ++j)
    uses.export_of[static_cast<size_t>(loop.exports[j].first)] = static_cast<int64_t>(j);
  for (size_t m = 0; m < loop.members.size(); ++m) {
    const FusedMember& member = loop.members[m];
    for (const FusedOperand& operand : member.operands) {
      if (operand.kind != FusedOperand::Kind::kTile) continue;
      uses.last_reader[static_cast<size_t>(operand.tile)] = static_cast<int64_t>(m);
      if (member.operands.size() == 1 && member.kernel != nullptr)
        uses.read_as_run[static_cast<size_t>(operand.tile)] = true;
    }
  }
  return uses;
}

ProgramSlots allocate_slots(const FusedLoop& loop, const TileUses& uses) {
  return SlotAssigner(loop, uses).assign();
}

std::vector<simd::ProgramStep> generate_steps(const FusedLoop& loop, const TileUses& uses,
                                              const ProgramSlots& slots) {
  const bool stream = loop.shape.num_elements() >= kStreamResultElements;
  const auto num_externals = static_cast<int64_t>(loop.externals.size());
  std::vector<simd::ProgramStep> steps, copies;
  auto copy_out = [&](int64_t slot, int64_t tile, int64_t export_index) {
    simd::ProgramStep copy;
    const bool bools = loop.tile_dtypes[static_cast<size_t>(tile)] == DType::bool_;
    copy.form = bools ? simd::ProgramStep::Form::kCopyBools : simd::ProgramStep::Form::kUnary;
    copy.op = static_cast<uint8_t>(simd::UnaryOp::kCopy);
    copy.a = static_cast<uint16_t>(slot);
    copy.y = static_cast<uint16_t>(num_externals + export_index);
    copy.stream = stream && !bools;
    copies.push_back(copy);
  };
  for (size_t m = 0; m < loop.members.size(); ++m) {
    const FusedMember& member = loop.members[m];
    const ProgramSlots::Member& placed = slots.members[m];
    const int64_t tile = member.result_tiles[0];
    const int64_t export_index = uses.export_of[static_cast<size_t>(tile)];
    if (member.kernel != nullptr) steps.push_back(member_step(member, placed, stream));
    if (export_index >= 0 && !placed.to_memory && !placed.result_scalar)
      copy_out(placed.result, tile, export_index);
  }
  // Results go out to memory only after every step has read its operands: the memory
  // plan may have put a result over an operand that a later step still reads.
  steps.insert(steps.end(), copies.begin(), copies.end());
  return steps;
}

std::optional<FusedProgram> build_program(const FusedLoop& loop) {
  std::optional<DType> dtype = program_dtype(loop);
  if (!dtype) return std::nullopt;
  FusedProgram program;
  program.dtype = *dtype;
  lay_out_memory(loop, program);
  const TileUses uses = tile_uses(loop);
  ProgramSlots slots = allocate_slots(loop, uses);
  // Slots are numbered in 16 bits; a group that needs more runs member by member.
  const auto num_slots =
      static_cast<int64_t>(loop.externals.size() + loop.exports.size()) + slots.num_tiles;
  if (num_slots > std::numeric_limits<uint16_t>::max()) return std::nullopt;
  program.steps = generate_steps(loop, uses, slots);
  for (int64_t source : slots.scalar_externals)
    program.external_scalar[static_cast<size_t>(source)] = true;
  program.expansions = std::move(slots.expansions);
  program.num_tiles = slots.num_tiles;
  return program;
}

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
    member.prim = equation.prim;
    member.site = equation.site;
    if (equation.prim == prim::broadcast_in_dim) {
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

// Unlike a member's kernel, a program cannot fail (float vector loops only): nothing here
// needs to name a member in an error.
void FusedLoop::run_program(std::span<const void* const> external_data,
                            std::span<void* const> export_data, ComputePool& pool) const {
  const int64_t n = shape.num_elements();
  const int64_t block = kProgramTileBytes / dtype_size(program->dtype);
  const size_t num_externals = externals.size();
  const size_t num_exports = exports.size();
  const size_t first_tile = num_externals + num_exports;
  const size_t num_slots = first_tile + static_cast<size_t>(program->num_tiles);
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
    std::byte* scratch = aligned_scratch(program->num_tiles * kProgramTileBytes);
    auto tile_memory = [&](size_t slot) {
      return scratch + (slot - first_tile) * kProgramTileBytes;
    };
    thread_local std::vector<void*> slots;
    slots.resize(num_slots);
    for (size_t slot = first_tile; slot < num_slots; ++slot) slots[slot] = tile_memory(slot);
    const int64_t chunk_begin = n * chunk / chunks, chunk_end = n * (chunk + 1) / chunks;
    for (int64_t begin = chunk_begin; begin < chunk_end; begin += block) {
      const int64_t length = std::min(block, chunk_end - begin);
      for (size_t i = 0; i < num_externals; ++i) {
        auto* data = static_cast<std::byte*>(const_cast<void*>(external_data[i]));
        slots[i] = program->external_scalar[i] ? data : data + begin * program->external_item[i];
      }
      for (size_t j = 0; j < num_exports; ++j) {
        slots[num_externals + j] =
            static_cast<std::byte*>(export_data[j]) + begin * program->export_item[j];
      }
      for (const FusedProgram::Expansion& expanded : program->expansions) {
        const auto* source =
            static_cast<const std::byte*>(external_data[static_cast<size_t>(expanded.source)]);
        const int64_t in_row = expanded.row > 0 ? begin % expanded.row : 0;
        if (expanded.row > 0 && in_row + length <= expanded.row) {
          slots[expanded.slot] = const_cast<std::byte*>(source + in_row * expanded.item);
        } else {
          std::byte* tile = tile_memory(expanded.slot);
          expand_into(source, expanded.strides, shape, expanded.item, begin, begin + length, tile);
          slots[expanded.slot] = tile;
        }
      }
      if (program->dtype == DType::f32) {
        simd::run_program_f32(steps, program->steps.size(), slots.data(),
                              static_cast<size_t>(length));
      } else {
        simd::run_program_f64(steps, program->steps.size(), slots.data(),
                              static_cast<size_t>(length));
      }
    }
    simd::flush_streams();  // the streamed results are complete before the chunk ends
  });
}

namespace {

// Where each tile buffer of the member-by-member loop lives in a thread's scratch block:
// 64-byte aligned, one after another.
struct TileLayout {
  std::vector<int64_t> offset;  // per tile buffer
  int64_t bytes = 0;
};

TileLayout tile_layout(const std::vector<DType>& tile_dtypes) {
  TileLayout layout;
  for (DType dtype : tile_dtypes) {
    layout.offset.push_back(layout.bytes);
    layout.bytes += (kTileElements * dtype_size(dtype) + 63) / 64 * 64;
  }
  return layout;
}

// One tile of the member-by-member loop: elements [begin, end) of the group's shape, with
// the memory the members read and write.
struct TileContext {
  const FusedLoop& loop;
  std::span<const void* const> external_data;
  std::span<void* const> export_data;
  std::byte* scratch;  // this thread's tile buffers
  const TileLayout& layout;
  int64_t begin = 0;
  int64_t end = 0;

  std::byte* tile(int64_t index) const {
    return scratch + layout.offset[static_cast<size_t>(index)];
  }
  const std::byte* external(int64_t source) const {
    return static_cast<const std::byte*>(external_data[static_cast<size_t>(source)]);
  }
};

// Where a member reads one operand over the tile, and whether it is one element repeated.
struct OperandData {
  const void* data = nullptr;
  bool scalar = false;
};

// An expanded operand is first copied into its own tile buffer.
OperandData operand_data(const FusedOperand& operand, const TileContext& tile) {
  const int64_t item = dtype_size(operand.dtype);
  switch (operand.kind) {
    case FusedOperand::Kind::kTile:
      return {tile.tile(operand.tile), false};
    case FusedOperand::Kind::kDirect:
      return {tile.external(operand.source) + tile.begin * item, false};
    case FusedOperand::Kind::kScalar:
      return {tile.external(operand.source), true};
    case FusedOperand::Kind::kExpanded:
      expand_into(tile.external(operand.source), operand.strides, tile.loop.shape, item, tile.begin,
                  tile.end, tile.tile(operand.tile));
      return {tile.tile(operand.tile), false};
  }
  return {};
}

// Where the member writes its first result: straight to memory when it is the loop's
// direct export, else into its tile.
void* result_data(const FusedMember& member, const TileContext& tile) {
  if (member.direct_export < 0) return tile.tile(member.result_tiles[0]);
  return static_cast<std::byte*>(tile.export_data[static_cast<size_t>(member.direct_export)]) +
         tile.begin * dtype_size(member.result_dtypes[0]);
}

// broadcast_in_dim: its operand expanded into the result tile.
void expand_broadcast(const FusedMember& member, const TileContext& tile) {
  const FusedOperand& operand = member.operands[0];
  expand_into(tile.external(operand.source), operand.strides, tile.loop.shape,
              dtype_size(operand.dtype), tile.begin, tile.end, tile.tile(member.result_tiles[0]));
}

// The arithmetic vector loop the member's eager kernel would run, called on the tile.
void run_vector_loop(const FusedMember& member, const TileContext& tile, void* result,
                     simd::Store store) {
  OperandData operands[3];
  for (size_t i = 0; i < member.operands.size(); ++i)
    operands[i] = operand_data(member.operands[i], tile);
  const auto count = static_cast<size_t>(tile.end - tile.begin);
  auto stride = [&](size_t i) { return operands[i].scalar ? size_t{0} : size_t{1}; };
  switch (member.vector) {
    case FusedMember::Vector::kUnaryF32:
      simd::unary_f32(static_cast<simd::UnaryOp>(member.vector_op),
                      static_cast<const float*>(operands[0].data), static_cast<float*>(result),
                      count, store);
      break;
    case FusedMember::Vector::kUnaryF64:
      simd::unary_f64(static_cast<simd::UnaryOp>(member.vector_op),
                      static_cast<const double*>(operands[0].data), static_cast<double*>(result),
                      count, store);
      break;
    case FusedMember::Vector::kBinaryF32:
      simd::binary_f32(static_cast<simd::BinaryOp>(member.vector_op),
                       static_cast<const float*>(operands[0].data), stride(0),
                       static_cast<const float*>(operands[1].data), stride(1),
                       static_cast<float*>(result), count, store);
      break;
    case FusedMember::Vector::kBinaryF64:
      simd::binary_f64(static_cast<simd::BinaryOp>(member.vector_op),
                       static_cast<const double*>(operands[0].data), stride(0),
                       static_cast<const double*>(operands[1].data), stride(1),
                       static_cast<double*>(result), count, store);
      break;
    default:
      break;
  }
}

// A kernel call's arguments, reused from tile to tile of a chunk.
struct KernelArgs {
  std::vector<AbstractValue> input_avals, output_avals;
  std::vector<KernelInput> inputs;
  std::vector<KernelOutput> outputs;
};

// The member's own kernel on the tile: a one-element operand is passed whole.
void run_kernel(const FusedMember& member, const TileContext& tile, void* result, KernelArgs& args,
                ComputePool& pool) {
  const int64_t length = tile.end - tile.begin;
  args.input_avals.clear();
  args.inputs.clear();
  args.input_avals.reserve(member.operands.size());
  for (const FusedOperand& operand : member.operands) {
    OperandData data = operand_data(operand, tile);
    args.input_avals.emplace_back(Shape{data.scalar ? 1 : length}, operand.dtype);
    args.inputs.push_back({data.data, nullptr});
  }
  for (size_t i = 0; i < args.inputs.size(); ++i) args.inputs[i].aval = &args.input_avals[i];
  args.output_avals.clear();
  args.outputs.clear();
  args.output_avals.reserve(member.result_tiles.size());
  for (size_t r = 0; r < member.result_tiles.size(); ++r) {
    args.output_avals.emplace_back(Shape{length}, member.result_dtypes[r]);
    args.outputs.push_back({r == 0 ? result : tile.tile(member.result_tiles[r]), nullptr});
  }
  for (size_t r = 0; r < args.outputs.size(); ++r) args.outputs[r].aval = &args.output_avals[r];
  try {
    member.kernel(KernelCall{args.inputs, args.outputs, *member.params, pool});
  } catch (const Error& error) {
    throw primitive_failed(member.prim, member.site, error);
  }
}

void run_member(const FusedMember& member, const TileContext& tile, KernelArgs& args,
                ComputePool& pool) {
  if (member.kernel == nullptr) return expand_broadcast(member, tile);
  void* result = result_data(member, tile);
  // A long result written straight to memory streams past the caches, as the eager
  // kernel's stores do for it: nothing reads it back soon.
  const simd::Store store =
      member.direct_export >= 0 && tile.loop.shape.num_elements() >= kStreamResultElements
          ? simd::Store::kStream
          : simd::Store::kAuto;
  if (member.arithmetic()) return run_vector_loop(member, tile, result, store);
  run_kernel(member, tile, result, args, pool);
}

// Copies the tile's exported results to memory, but for the one its member wrote there.
void write_exports(const TileContext& tile) {
  const FusedLoop& loop = tile.loop;
  const int64_t length = tile.end - tile.begin;
  for (size_t j = 0; j < loop.exports.size(); ++j) {
    if (static_cast<int64_t>(j) == loop.members.back().direct_export) continue;
    const int64_t index = loop.exports[j].first;
    const int64_t item = dtype_size(loop.tile_dtypes[static_cast<size_t>(index)]);
    std::memcpy(static_cast<std::byte*>(tile.export_data[j]) + tile.begin * item, tile.tile(index),
                static_cast<size_t>(length * item));
  }
}

}  // namespace

void FusedLoop::run(std::span<const void* const> external_data, std::span<void* const> export_data,
                    ComputePool& pool) const {
  if (program) return run_program(external_data, export_data, pool);
  const TileLayout layout = tile_layout(tile_dtypes);
  const int64_t n = shape.num_elements();
  const int64_t chunks = chunk_count(n, kChunkElements);
  pool.parallel_for(chunks, [&](int64_t chunk) {
    const int64_t chunk_begin = n * chunk / chunks, chunk_end = n * (chunk + 1) / chunks;
    TileContext tile{*this,  external_data, export_data, aligned_scratch(layout.bytes),
                     layout, chunk_begin,   chunk_begin};
    KernelArgs args;
    for (; tile.begin < chunk_end; tile.begin += kTileElements) {
      tile.end = std::min(tile.begin + kTileElements, chunk_end);
      for (const FusedMember& member : members) run_member(member, tile, args, pool);
      write_exports(tile);
    }
  });
}

}  // namespace kiln::detail
