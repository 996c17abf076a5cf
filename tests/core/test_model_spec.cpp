#include <catch2/catch.hpp>

#include "core/error.hpp"
#include "core/model_spec.hpp"

using namespace psbed;
using Catch::Contains;

TEST_CASE("every shipped spec builds with the documented parameter count", "[core][spec]") {
  // The counts follow from the layer lists in docs/models-and-data.md (weights + biases).
  struct Expect {
    const char* name;
    std::int64_t params;
    Shape input;
  };
  const Expect expected[] = {
      {"mlp", 784 * 512 + 512 + 512 * 256 + 256 + 256 * 10 + 10, {1, 28, 28}},
      {"lenet5",
       (6 * 25 + 6) + (16 * 6 * 25 + 16) + (400 * 120 + 120) + (120 * 84 + 84) + (84 * 10 + 10),
       {1, 28, 28}},
      {"cnn-cifar",
       (3 * 32 * 9 + 32) + (32 * 64 * 9 + 64) + (64 * 128 * 9 + 128) + (2048 * 256 + 256) +
           (256 * 10 + 10),
       {3, 32, 32}},
      {"vgg-mini",
       (3 * 64 * 9 + 64) + (64 * 64 * 9 + 64) + (64 * 128 * 9 + 128) + (128 * 128 * 9 + 128) +
           (128 * 256 * 9 + 256) + (256 * 256 * 9 + 256) + (4096 * 1024 + 1024) +
           (1024 * 1024 + 1024) + (1024 * 10 + 10),
       {3, 32, 32}},
  };
  for (const auto& e : expected) {
    INFO(e.name);
    ModelSpec m = load_model(e.name);
    CHECK(m.name == e.name);
    CHECK(m.parameter_count() == e.params);
    CHECK(m.input.c == e.input.c);
    CHECK(m.input.h == e.input.h);
    CHECK(m.classes == 10);
    CHECK(m.layers.back().out.numel() == 10);
    // Weights and biases alternate, in layer order.
    for (size_t t = 0; t + 1 < m.tensors.size(); t += 2) {
      CHECK(m.tensors[t].name.find(".weight") != std::string::npos);
      CHECK(m.tensors[t + 1].name.find(".bias") != std::string::npos);
      CHECK(m.tensors[t].layer == m.tensors[t + 1].layer);
    }
  }
  CHECK(load_model("vgg-mini").parameter_count() == 6400586);
  CHECK(load_model("lenet5").layers[6].in.numel() == 400);
}

TEST_CASE("spec shapes are inferred layer by layer", "[core][spec]") {
  ModelSpec m = load_model("lenet5");
  REQUIRE(m.layers.size() == 11);
  CHECK(m.layers[0].out.str() == "6x28x28");
  CHECK(m.layers[2].out.str() == "6x14x14");
  CHECK(m.layers[3].out.str() == "16x10x10");
  CHECK(m.layers[5].out.str() == "16x5x5");
  CHECK(m.tensors[0].dims == std::vector<std::int64_t>{6, 1, 5, 5});
}

TEST_CASE("bad specs get an error naming the layer", "[core][spec]") {
  const std::string head = "input = [1, 8, 8]\nclasses = 10\n";
  SECTION("unknown layer type") {
    REQUIRE_THROWS_WITH(parse_model_spec(head + "[[layer]]\ntype = \"convv\"\n", "bad.toml"),
                        Contains("layer #1") && Contains("unknown type 'convv'"));
  }
  SECTION("fc input mismatch") {
    REQUIRE_THROWS_WITH(
        parse_model_spec(head + "[[layer]]\ntype = \"fc\"\nname = \"fc1\"\nin = 100\nout = 10\n",
                         "bad.toml"),
        Contains("'fc1'") && Contains("in = 100") && Contains("64 features"));
  }
  SECTION("conv channel mismatch") {
    REQUIRE_THROWS_WITH(
        parse_model_spec(head +
                             "[[layer]]\ntype = \"conv\"\nname = \"c1\"\nin_channels = 3\n"
                             "out_channels = 4\nkernel = 3\n[[layer]]\ntype = \"fc\"\nout = 10\n",
                         "bad.toml"),
        Contains("'c1'") && Contains("in_channels = 3"));
  }
  SECTION("kernel larger than input") {
    REQUIRE_THROWS_WITH(
        parse_model_spec(head + "[[layer]]\ntype = \"conv\"\nout_channels = 4\nkernel = 9\n",
                         "bad.toml"),
        Contains("layer #1") && Contains("does not fit"));
  }
  SECTION("wrong number of classes at the end") {
    REQUIRE_THROWS_WITH(
        parse_model_spec(head + "[[layer]]\ntype = \"fc\"\nname = \"last\"\nout = 7\n", "bad.toml"),
        Contains("'last'") && Contains("10 classes"));
  }
  SECTION("missing required key") {
    REQUIRE_THROWS_WITH(parse_model_spec(head + "[[layer]]\ntype = \"fc\"\n", "bad.toml"),
                        Contains("layer #1") && Contains("missing 'out'"));
  }
  SECTION("unknown key") {
    REQUIRE_THROWS_WITH(
        parse_model_spec(head + "[[layer]]\ntype = \"fc\"\nout = 10\nbias = false\n", "bad.toml"),
        Contains("unknown key 'bias'"));
  }
  SECTION("TOML syntax error names the file and line") {
    REQUIRE_THROWS_WITH(parse_model_spec("input = [1, 8\n", "broken.toml"),
                        Contains("broken.toml:"));
  }
  SECTION("unknown model name lists the shipped ones") {
    REQUIRE_THROWS_WITH(load_model("resnet152"),
                        Contains("unknown model 'resnet152'") && Contains("lenet5"));
  }
}

TEST_CASE("spec: unknown top-level keys are refused by name", "[core][spec]") {
  const std::string layers = "[[layer]]\ntype = \"fc\"\nout = 5\n";
  REQUIRE_THROWS_WITH(parse_model_spec("input = [1, 2, 2]\nclases = 5\n" + layers, "typo.toml"),
                      Contains("typo.toml") && Contains("unknown key 'clases'") &&
                          Contains("name, input, classes or layer"));
}

TEST_CASE("spec: wrongly typed top-level values are refused, not replaced by defaults",
          "[core][spec]") {
  const std::string layers = "[[layer]]\ntype = \"fc\"\nout = 10\n";
  REQUIRE_THROWS_WITH(parse_model_spec("input = [1, 2, 2]\nclasses = \"ten\"\n" + layers, "t.toml"),
                      Contains("t.toml") && Contains("'classes' must be an integer, got a string"));
  REQUIRE_THROWS_WITH(parse_model_spec("name = 5\ninput = [1, 2, 2]\n" + layers, "t.toml"),
                      Contains("'name' must be a string, got an integer"));
  REQUIRE_THROWS_WITH(parse_model_spec("input = [1, 2.5, 2]\n" + layers, "t.toml"),
                      Contains("'input'") && Contains("integers, got a float"));
  REQUIRE_THROWS_WITH(parse_model_spec("input = [1, 2, 2]\nlayer = 3\n", "t.toml"),
                      Contains("'layer' must be an array of tables"));
  REQUIRE_THROWS_WITH(
      parse_model_spec("input = [1, 2, 2]\n[[layer]]\ntype = 3\nout = 10\n", "t.toml"),
      Contains("layer #1") && Contains("'type' must be a string"));
  REQUIRE_THROWS_WITH(
      parse_model_spec("input = [1, 2, 2]\n[[layer]]\ntype = \"fc\"\nname = 7\nout = 10\n",
                       "t.toml"),
      Contains("layer #1") && Contains("'name' must be a string, got an integer"));
  REQUIRE_THROWS_WITH(
      parse_model_spec("input = [1, 2, 2]\n[[layer]]\ntype = \"fc\"\nout = 10.5\n", "t.toml"),
      Contains("layer #1") && Contains("'out' must be an integer, got a float"));
  REQUIRE_THROWS_WITH(
      parse_model_spec("input = [1, 2, 2]\n[[layer]]\ntype = \"fc\"\nout = true\n", "t.toml"),
      Contains("layer #1") && Contains("'out' must be an integer, got a boolean"));
  // Whole floats are integers, as the parser has always read them.
  const ModelSpec w = parse_model_spec(
      "input = [1.0, 4, 4]\nclasses = 3.0\n[[layer]]\ntype = \"conv\"\nout_channels = 2.0\nkernel "
      "= 3\n"
      "[[layer]]\ntype = \"fc\"\nout = 3.0\n",
      "w.toml");
  CHECK(w.input.c == 1);
  CHECK(w.classes == 3);
  CHECK(w.layers[0].out_channels == 2);
  CHECK(w.layers[1].out_channels == 3);
  // The defaults still apply when the keys are absent.
  ModelSpec m = parse_model_spec("input = [1, 2, 2]\n" + layers, "dir/plain.toml");
  CHECK(m.name == "plain");
  CHECK(m.classes == 10);
}

TEST_CASE("spec: keys that do not apply to a layer's type are refused", "[core][spec]") {
  const std::string head = "input = [1, 8, 8]\nclasses = 10\n";
  REQUIRE_THROWS_WITH(
      parse_model_spec(head + "[[layer]]\ntype = \"fc\"\nname = \"head\"\nkernel = 3\nout = 10\n",
                       "k.toml"),
      Contains("layer #1 'head'") && Contains("'kernel'") && Contains("type fc") &&
          Contains("type, name, in or out"));
  REQUIRE_THROWS_WITH(
      parse_model_spec(
          head + "[[layer]]\ntype = \"relu\"\nout = 3\n[[layer]]\ntype = \"fc\"\nout = 10\n",
          "k.toml"),
      Contains("layer #1") && Contains("'out'") && Contains("type relu"));
  REQUIRE_THROWS_WITH(parse_model_spec(head + "[[layer]]\ntype = \"maxpool\"\nout_channels = 3\n"
                                              "[[layer]]\ntype = \"fc\"\nout = 10\n",
                                       "k.toml"),
                      Contains("'out_channels'") && Contains("type maxpool"));
  REQUIRE_THROWS_WITH(
      parse_model_spec(head + "[[layer]]\ntype = \"conv\"\nout_channels = 2\nkernel = 3\nin = 64\n"
                              "[[layer]]\ntype = \"fc\"\nout = 10\n",
                       "k.toml"),
      Contains("'in'") && Contains("type conv"));
}

TEST_CASE("spec: values past int are refused with their real value before narrowing",
          "[core][spec]") {
  const std::string fc10 = "[[layer]]\ntype = \"fc\"\nout = 10\n";
  REQUIRE_THROWS_WITH(
      parse_model_spec("input = [1, 2, 2]\nclasses = 3000000000\n" + fc10, "o.toml"),
      Contains("'classes' = 3000000000 is out of range"));
  REQUIRE_THROWS_WITH(parse_model_spec("input = [1, 2, 2]\nclasses = 1\n" + fc10, "o.toml"),
                      Contains("'classes' = 1 is out of range, expected 2 to"));
  REQUIRE_THROWS_WITH(
      parse_model_spec("input = [1, 50000, 50000]\n" + fc10, "o.toml"),
      Contains("1x50000x50000 has 2500000000 features") && Contains("at most 2147483647"));
  REQUIRE_THROWS_WITH(parse_model_spec("input = [16777216, 16777216, 16777216]\n" + fc10, "o.toml"),
                      Contains("has more than 9223372036854775807 features"));
  REQUIRE_THROWS_WITH(parse_model_spec("input = [1, 4294967297, 2]\n" + fc10, "o.toml"),
                      Contains("'input' entry 4294967297 is out of range"));
  REQUIRE_THROWS_WITH(
      parse_model_spec("input = [1, 2, 2]\n[[layer]]\ntype = \"fc\"\nout = 4294967306\n", "o.toml"),
      Contains("layer #1") && Contains("'out' = 4294967306 is out of range"));
  // A conv whose output features pass int.
  REQUIRE_THROWS_WITH(parse_model_spec("input = [1, 4096, 4096]\n[[layer]]\ntype = \"conv\"\n"
                                       "out_channels = 256\nkernel = 1\n" +
                                           fc10,
                                       "o.toml"),
                      Contains("layer #1") && Contains("256x4096x4096 = 4294967296 features"));
  // Parameter counts: one fc of 2^16 x 2^16 weights, then one too many.
  REQUIRE_THROWS_WITH(
      parse_model_spec("input = [1, 256, 256]\nclasses = 65536\n[[layer]]\ntype = \"fc\"\n"
                       "name = \"big\"\nout = 65536\n",
                       "o.toml"),
      Contains("'big'") && Contains("4295032832 parameters") && Contains("at most 2147483647"));
  REQUIRE_THROWS_WITH(
      parse_model_spec("input = [1, 2, 2]\n[[layer]]\ntype = \"fc\"\nout = 16000000\n"
                       "[[layer]]\ntype = \"fc\"\nname = \"second\"\nout = 200\n",
                       "o.toml"),
      Contains("'second'") && Contains("3200000200 parameters after 80000000"));
}

TEST_CASE("spec: a maxpool whose pad reaches its kernel is refused; a conv's is allowed",
          "[core][spec]") {
  const std::string head = "input = [1, 8, 8]\nclasses = 10\n";
  const std::string fc10 = "[[layer]]\ntype = \"fc\"\nout = 10\n";
  REQUIRE_THROWS_WITH(
      parse_model_spec(
          head + "[[layer]]\ntype = \"maxpool\"\nname = \"p\"\nkernel = 2\npad = 2\n" + fc10,
          "pool.toml"),
      Contains("pool.toml") && Contains("layer #1 'p'") && Contains("pad = 2") &&
          Contains("less than kernel = 2"));
  REQUIRE_THROWS_WITH(
      parse_model_spec(head + "[[layer]]\ntype = \"maxpool\"\nkernel = 3\npad = 5\n" + fc10,
                       "pool.toml"),
      Contains("pad = 5"));
  ModelSpec ok = parse_model_spec(
      head + "[[layer]]\ntype = \"maxpool\"\nkernel = 3\nstride = 1\npad = 2\n" + fc10,
      "pool.toml");
  CHECK(ok.layers[0].out.str() == "1x10x10");
  // Zero padding wider than a conv's kernel is well defined (border outputs are the bias).
  ModelSpec conv = parse_model_spec(
      head + "[[layer]]\ntype = \"conv\"\nout_channels = 2\nkernel = 1\npad = 2\n" + fc10,
      "conv.toml");
  CHECK(conv.layers[0].out.str() == "2x12x12");
}

TEST_CASE("spec: default layer names skip explicit ones; duplicates name both layers",
          "[core][spec]") {
  const std::string head = "input = [1, 2, 2]\nclasses = 10\n";
  SECTION("a named fc2 then an unnamed fc") {
    ModelSpec m = parse_model_spec(head +
                                       "[[layer]]\ntype = \"fc\"\nname = \"fc2\"\nout = 6\n"
                                       "[[layer]]\ntype = \"fc\"\nout = 10\n",
                                   "n.toml");
    REQUIRE(m.layers.size() == 2);
    CHECK(m.layers[0].name == "fc2");
    CHECK(m.layers[1].name == "fc3");
  }
  SECTION("an unnamed fc before a layer named fc1") {
    ModelSpec m = parse_model_spec(head +
                                       "[[layer]]\ntype = \"fc\"\nout = 6\n"
                                       "[[layer]]\ntype = \"relu\"\n"
                                       "[[layer]]\ntype = \"fc\"\nname = \"fc1\"\nout = 10\n",
                                   "n.toml");
    CHECK(m.layers[0].name == "fc2");
    CHECK(m.layers[1].name == "relu1");
    CHECK(m.layers[2].name == "fc1");
    CHECK(m.tensors[0].name == "fc2.weight");
  }
  SECTION("the same explicit name twice") {
    REQUIRE_THROWS_WITH(
        parse_model_spec(head + "[[layer]]\ntype = \"fc\"\nname = \"a\"\nout = 6\n"
                                "[[layer]]\ntype = \"relu\"\n"
                                "[[layer]]\ntype = \"fc\"\nname = \"a\"\nout = 10\n",
                         "n.toml"),
        Contains("layer #3 'a'") && Contains("duplicate layer name") && Contains("layer #1"));
  }
  SECTION("empty name") {
    REQUIRE_THROWS_WITH(
        parse_model_spec(head + "[[layer]]\ntype = \"fc\"\nname = \"\"\nout = 10\n", "n.toml"),
        Contains("layer #1") && Contains("'name' must not be empty"));
  }
}

TEST_CASE("spec: shipped models keep their layer and tensor names", "[core][spec]") {
  // Default names count layers of a type (the nth relu is reluN), as before explicit names
  // were reserved: profiles and traces of the shipped models carry these names.
  ModelSpec m = load_model("lenet5");
  std::vector<std::string> names;
  for (const auto& l : m.layers) names.push_back(l.name);
  CHECK(names == std::vector<std::string>{"conv1", "relu1", "maxpool1", "conv2", "relu2",
                                          "maxpool2", "fc1", "relu3", "fc2", "relu4", "fc3"});
  ModelSpec v = load_model("vgg-mini");
  CHECK(v.layers[4].name == "maxpool1");
  CHECK(v.layers.back().name == "fc3");
  CHECK(v.tensors.size() == 18);
}
