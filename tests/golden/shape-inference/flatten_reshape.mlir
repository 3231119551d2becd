"builtin.module"() ({
  "netc.network"() ({
    %data = "netc.input"() {name = "data", dtype = "f32", shape = [16, 6, 6, 32]} : () -> tensor<16x6x6x32xf32> loc("tests/golden/shape-inference/flatten_reshape.nd":4:9)
    %fc = "netc.inner_product"(%data) {name = "fc", num_outputs = 100} : (tensor<16x6x6x32xf32>) -> tensor<16x100xf32> loc("tests/golden/shape-inference/flatten_reshape.nd":5:3)
    %r1 = "netc.reshape"(%data) {name = "r1", output_shape = [16, -1]} : (tensor<16x6x6x32xf32>) -> tensor<16x1152xf32> loc("tests/golden/shape-inference/flatten_reshape.nd":6:3)
    %r2 = "netc.reshape"(%data) {name = "r2", output_shape = [-1, 36, -1]} : (tensor<16x6x6x32xf32>) -> tensor<16x36x32xf32> loc("tests/golden/shape-inference/flatten_reshape.nd":7:3)
    %r3 = "netc.reshape"(%fc) {name = "r3", output_shape = [4, 4, 10, 10]} : (tensor<16x100xf32>) -> tensor<4x4x10x10xf32> loc("tests/golden/shape-inference/flatten_reshape.nd":8:3)
    %flat = "netc.reshape"(%data) {name = "flat"} : (tensor<16x6x6x32xf32>) -> tensor<16x1152xf32> loc("tests/golden/shape-inference/flatten_reshape.nd":9:3)
    %prob = "netc.softmax"(%r3) {name = "prob"} : (tensor<4x4x10x10xf32>) -> tensor<4x400xf32> loc("tests/golden/shape-inference/flatten_reshape.nd":10:3)
  }) {sym_name = "net"} : () -> () loc("tests/golden/shape-inference/flatten_reshape.nd":3:9)
}) {source = "tests/golden/shape-inference/flatten_reshape.nd"} : () -> () loc("tests/golden/shape-inference/flatten_reshape.nd":1:1)
