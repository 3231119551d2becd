"builtin.module"() ({
  "netc.param"() {sym_name = "shared_w", type = tensor<20x10xf32>} : () -> () loc("tests/golden/materialize-params/share_by_name.nd":5:53)
  "netc.param"() {sym_name = "shared_b", type = tensor<10xf32>} : () -> () loc("tests/golden/materialize-params/share_by_name.nd":5:71)
  "netc.param"() {sym_name = "left.own.weight", type = tensor<10x2xf32>} : () -> () loc("tests/golden/materialize-params/share_by_name.nd":6:3)
  "netc.param"() {sym_name = "left.own.bias", type = tensor<2xf32>} : () -> () loc("tests/golden/materialize-params/share_by_name.nd":6:3)
  "netc.param"() {sym_name = "right.conv.weight", type = tensor<1x3x1x2xf32>} : () -> () loc("tests/golden/materialize-params/share_by_name.nd":12:3)
  "netc.param"() {sym_name = "right.conv.bias", type = tensor<2xf32>} : () -> () loc("tests/golden/materialize-params/share_by_name.nd":12:3)
  "netc.network"() ({
    %x = "netc.input"() {name = "x", dtype = "f32", shape = [8, 20]} : () -> tensor<8x20xf32> loc("tests/golden/materialize-params/share_by_name.nd":4:9)
    %fc = "netc.inner_product"(%x) {name = "fc", num_outputs = 10, params = {weight = @shared_w, bias = @shared_b}} : (tensor<8x20xf32>) -> tensor<8x10xf32> loc("tests/golden/materialize-params/share_by_name.nd":5:3)
    %own = "netc.inner_product"(%fc) {name = "own", num_outputs = 2, params = {weight = @left.own.weight, bias = @left.own.bias}} : (tensor<8x10xf32>) -> tensor<8x2xf32> loc("tests/golden/materialize-params/share_by_name.nd":6:3)
  }) {sym_name = "left"} : () -> () loc("tests/golden/materialize-params/share_by_name.nd":3:9)
  "netc.network"() ({
    %x_1 = "netc.input"() {name = "x", dtype = "f32", shape = [8, 20]} : () -> tensor<8x20xf32> loc("tests/golden/materialize-params/share_by_name.nd":9:9)
    %fc_1 = "netc.inner_product"(%x_1) {name = "fc", num_outputs = 10, params = {weight = @shared_w, bias = @shared_b}} : (tensor<8x20xf32>) -> tensor<8x10xf32> loc("tests/golden/materialize-params/share_by_name.nd":10:3)
    %conv_in = "netc.reshape"(%fc_1) {name = "conv_in", output_shape = [8, 1, 10, 1]} : (tensor<8x10xf32>) -> tensor<8x1x10x1xf32> loc("tests/golden/materialize-params/share_by_name.nd":11:3)
    %conv = "netc.conv2d"(%conv_in) {name = "conv", filter = [1, 3, 1, 2], padding = "VALID", params = {weight = @right.conv.weight, bias = @right.conv.bias}} : (tensor<8x1x10x1xf32>) -> tensor<8x1x8x2xf32> loc("tests/golden/materialize-params/share_by_name.nd":12:3)
  }) {sym_name = "right"} : () -> () loc("tests/golden/materialize-params/share_by_name.nd":8:9)
}) {source = "tests/golden/materialize-params/share_by_name.nd"} : () -> () loc("tests/golden/materialize-params/share_by_name.nd":1:1)
