// Program text with nested sub-programs (the params of scan, cond and while_loop): written
// by hand with other names and spacing it parses, verifies and prints canonically; nested
// programs are closed (they cannot use the outer program's variables); malformed nested
// text fails with the line and column of the problem.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>

#include "ir/ir_errors.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "kiln/ops.h"
#include "transforms/eval.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;
using testing::parse_error;
using testing::verify_error;

// A cumulative sum: scan over x with carry s.
constexpr std::string_view kCumsum =
    "{ lambda ; x:f32[3]. let\n"
    "    s:f32[] ys:f32[3] = scan[body={ lambda ; c:f32[] e:f32[]. let\n"
    "        n:f32[] = add c e\n"
    "      in (n n) } length=3 num_consts=0 num_carry=1 reverse=false unroll=1 recompute=false] "
    "0.0:f32[] x\n"
    "  in (s ys) }";

TEST(NestedPrograms, HandWrittenScanParsesRunsAndPrintsCanonically) {
  Program program = parse_program(kCumsum);
  verify(program);
  EXPECT_EQ(print_program(program),
            "{ lambda ; a:f32[3]. let\n"
            "    b:f32[] c:f32[3] = scan[body={ lambda ; a:f32[] b:f32[]. let\n"
            "        c:f32[] = add a b\n"
            "      in (c c) } length=3 num_consts=0 num_carry=1 reverse=false unroll=1 "
            "recompute=false] 0.0:f32[] a\n"
            "  in (b c) }");
  std::vector<Array> out =
      eval_program(program, std::vector<Array>{from_host<float>({1, 2, 3}, {3})}, CallSite());
  EXPECT_EQ(out[0].item<float>(), 6.0f);
  EXPECT_EQ(out[1].to_vector<float>(), (std::vector<float>{1, 3, 6}));
}

TEST(NestedPrograms, OneLineAndBranchLists) {
  std::string text =
      "{ lambda ; i:i32[] x:f32[2]. let y:f32[2] = cond[branches=({ lambda ; a:f32[2]. let "
      "b:f32[2] = neg a in (b) }, { lambda ; a:f32[2]. let in (a) })] i x in (y) }";
  Program program = parse_program(text);
  verify(program);
  std::string printed = print_program(program);
  EXPECT_THAT(printed, HasSubstr("cond[branches=({ lambda ; a:f32[2]. let\n"));
  EXPECT_EQ(print_program(parse_program(printed)), printed);
}

TEST(NestedPrograms, AreClosed) {
  std::string text =
      "{ lambda ; x:f32[]. let\n"
      "    s:f32[] = while_loop[cond={ lambda ; c:f32[]. let\n"
      "        p:bool[] = lt c x\n"
      "      in (p) } body={ lambda ; c:f32[]. let in (c) } cond_num_consts=0 "
      "body_num_consts=0] x\n"
      "  in (s) }";
  EXPECT_EQ(parse_error(text), "program text 3:25: undefined variable 'x'");
}

TEST(NestedPrograms, MalformedNestedTextFailsWithAPosition) {
  // The nested program is not closed before the next param.
  EXPECT_EQ(parse_error("{ lambda ; x:f32[3]. let\n"
                        "    s:f32[] ys:f32[3] = scan[body={ lambda ; c:f32[] e:f32[]. let\n"
                        "        n:f32[] = add c e\n"
                        "      in (n n) length=3 num_consts=0 num_carry=1 reverse=false "
                        "unroll=1 recompute=false] 0.0:f32[] x\n"
                        "  in (s ys) }"),
            "program text 4:16: expected '}' to close the program, found 'length'");
  // A value that is not a program.
  EXPECT_EQ(parse_error("{ lambda ; x:f32[3]. let\n"
                        "    s:f32[] ys:f32[3] = scan[body=3 length=3 num_consts=0 num_carry=1 "
                        "reverse=false unroll=1 recompute=false] 0.0:f32[] x\n"
                        "  in (s ys) }"),
            "program text 2:35: expected a program '{ lambda ... }' for body of scan, found '3'");
  // Branches not separated by commas.
  EXPECT_EQ(parse_error("{ lambda ; i:i32[] x:f32[2]. let\n"
                        "    y:f32[2] = cond[branches=({ lambda ; a:f32[2]. let in (a) }\n"
                        "                              { lambda ; a:f32[2]. let in (a) })] i x\n"
                        "  in (y) }"),
            "program text 3:31: expected ',' between the programs of branches of cond, found '{'");
  // An error inside the nested program points into it.
  EXPECT_EQ(parse_error("{ lambda ; x:f32[3]. let\n"
                        "    s:f32[] ys:f32[3] = scan[body={ lambda ; c:f32[] e:f32[]. let\n"
                        "        n:f32[] = ad c e\n"
                        "      in (n n) } length=3 num_consts=0 num_carry=1 reverse=false "
                        "unroll=1 recompute=false] 0.0:f32[] x\n"
                        "  in (s ys) }"),
            "program text 3:19: unknown primitive 'ad' (did you mean 'add'?)");
}

TEST(NestedPrograms, ShapeRulesCheckTheSubPrograms) {
  // The body turns the f32[] carry into f32[2].
  std::string message = parse_error(
      "{ lambda ; x:f32[3,2]. let\n"
      "    s:f32[] ys:f32[3,2] = scan[body={ lambda ; c:f32[] e:f32[2]. let\n"
      "        n:f32[2] = add c e\n"
      "      in (n n) } length=3 num_consts=0 num_carry=1 reverse=false unroll=1 recompute=false] "
      "0.0:f32[] x\n"
      "  in (s ys) }");
  EXPECT_THAT(message, HasSubstr("program text 2:27: scan: "));
  // (add needs equal ranks, so the nested program itself fails first.)
  EXPECT_FALSE(message.empty());
  EXPECT_EQ(parse_error("{ lambda ; x:f32[3,2]. let\n"
                        "    s:f32[] ys:f32[3,2] = scan[body={ lambda ; c:f32[] e:f32[2]. let\n"
                        "        n:f32[] = reduce_sum[axes=(0)] e\n"
                        "      in (e e) } length=3 num_consts=0 num_carry=1 reverse=false "
                        "unroll=1 recompute=false] 0.0:f32[] x\n"
                        "  in (s ys) }"),
            "program text 2:27: scan: the body returns carry leaf 0 as f32[2], but the carry is "
            "f32[]");
  EXPECT_EQ(parse_error("{ lambda ; i:i32[] x:f32[2]. let\n"
                        "    y:f32[2] = cond[branches=({ lambda ; a:f32[2]. let in (a) }, "
                        "{ lambda ; a:f32[2]. let b:f64[2] = convert_element_type[new_dtype=f64] "
                        "a in (b) })] i x\n"
                        "  in (y) }"),
            "program text 2:16: cond: branch 1 returns f64[2] as result 0, but branch 0 returns "
            "f32[2]");
}

// A copy of kCumsum's program whose scan body is changed by `edit`.
Program with_edited_body(const std::function<void(Program&)>& edit) {
  Program program = parse_program(kCumsum);
  auto& params = std::get<ScanParams>(program.equations[0].params);
  auto body = std::make_shared<Program>(*params.body.program);
  edit(*body);
  params.body.program = body;
  return program;
}

TEST(NestedPrograms, VerifyChecksSubProgramsToo) {
  Program undefined_output = with_edited_body([](Program& body) { body.outputs[1] = 99; });
  EXPECT_EQ(verify_error(undefined_output),
            "verify: equation 0 (scan): its body program: verify: output 1 is variable #99, but "
            "the program has 3 variables");
  Program used_before_defined = with_edited_body(
      [](Program& body) { body.equations[0].inputs[0] = body.equations[0].outputs[0]; });
  std::string message = verify_error(used_before_defined);
  EXPECT_THAT(message, HasSubstr("verify: equation 0 (scan): its body program is malformed: "
                                 "verify: equation 0 (add): operand 0 is used before it is "
                                 "defined\n    c:f32[] = add c b"));
  // The scan equation's own line is shown, not a line of its body.
  EXPECT_THAT(message, HasSubstr("\n    b:f32[] c:f32[3] = scan[body={ lambda"));
}

}  // namespace
}  // namespace kiln
