#include <catch2/catch.hpp>

#include "core/error.hpp"
#include "core/model_spec.hpp"

using namespace psbed;
using Catch::Contains;

TEST_CASE("every shipped spec builds with the documented parameter count", "[core][spec]") {
  // The counts follow from the layer lists in the README (weights + biases).
  struct Expect {
    const char* name;
    std::int64_t params;
    Shape input;
  };
  const Expect expected[] = {
      {"mlp", 784 * 512 + 512 + 512 * 256 + 256 + 256 * 10 + 10, {1, 28, 28}},
      {"lenet5", (6 * 25 + 6) + (16 * 6 * 25 + 16) + (400 * 120 + 120) + (120 * 84 + 84) + (84 * 10 + 10),
       {1, 28, 28}},
      {"cnn-cifar",
       (3 * 32 * 9 + 32) + (32 * 64 * 9 + 64) + (64 * 128 * 9 + 128) + (2048 * 256 + 256) + (256 * 10 + 10),
       {3, 32, 32}},
      {"vgg-mini",
       (3 * 64 * 9 + 64) + (64 * 64 * 9 + 64) + (64 * 128 * 9 + 128) + (128 * 128 * 9 + 128) +
           (128 * 256 * 9 + 256) + (256 * 256 * 9 + 256) + (4096 * 1024 + 1024) + (1024 * 1024 + 1024) +
           (1024 * 10 + 10),
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
        parse_model_spec(head + "[[layer]]\ntype = \"fc\"\nname = \"fc1\"\nin = 100\nout = 10\n", "bad.toml"),
        Contains("'fc1'") && Contains("in = 100") && Contains("64 features"));
  }
  SECTION("conv channel mismatch") {
    REQUIRE_THROWS_WITH(parse_model_spec(head +
                                             "[[layer]]\ntype = \"conv\"\nname = \"c1\"\nin_channels = 3\n"
                                             "out_channels = 4\nkernel = 3\n[[layer]]\ntype = \"fc\"\nout = 10\n",
                                         "bad.toml"),
                        Contains("'c1'") && Contains("in_channels = 3"));
  }
  SECTION("kernel larger than input") {
    REQUIRE_THROWS_WITH(parse_model_spec(head + "[[layer]]\ntype = \"conv\"\nout_channels = 4\nkernel = 9\n",
                                         "bad.toml"),
                        Contains("layer #1") && Contains("does not fit"));
  }
  SECTION("wrong number of classes at the end") {
    REQUIRE_THROWS_WITH(parse_model_spec(head + "[[layer]]\ntype = \"fc\"\nname = \"last\"\nout = 7\n", "bad.toml"),
                        Contains("'last'") && Contains("10 classes"));
  }
  SECTION("missing required key") {
    REQUIRE_THROWS_WITH(parse_model_spec(head + "[[layer]]\ntype = \"fc\"\n", "bad.toml"),
                        Contains("layer #1") && Contains("missing 'out'"));
  }
  SECTION("unknown key") {
    REQUIRE_THROWS_WITH(parse_model_spec(head + "[[layer]]\ntype = \"fc\"\nout = 10\nbias = false\n", "bad.toml"),
                        Contains("unknown key 'bias'"));
  }
  SECTION("TOML syntax error names the file and line") {
    REQUIRE_THROWS_WITH(parse_model_spec("input = [1, 8\n", "broken.toml"), Contains("broken.toml:"));
  }
  SECTION("unknown model name lists the shipped ones") {
    REQUIRE_THROWS_WITH(load_model("resnet152"), Contains("unknown model 'resnet152'") && Contains("lenet5"));
  }
}
