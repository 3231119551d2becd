"builtin.module"() ({
  "netc.param"() {sym_name = "w_live", share_from = @w_dead_owner, type = tensor<12x6xf32>} : () -> () loc("tests/golden/dce/dead_params.nd":6:57)
  "netc.param"() {sym_name = "live.bias", type = tensor<6xf32>} : () -> () loc("tests/golden/dce/dead_params.nd":6:3)
  "netc.param"() {sym_name = "w_dead_owner", type = tensor<12x6xf32>} : () -> () loc("tests/golden/dce/dead_params.nd":7:57)
  "netc.param"() {sym_name = "shared_b", type = tensor<6xf32>} : () -> () loc("tests/golden/dce/dead_params.nd":7:79)
  "netc.param"() {sym_name = "other.weight", type = tensor<6x6xf32>} : () -> () loc("tests/golden/dce/dead_params.nd":9:3)
  "netc.network"() ({
    %data = "netc.input"() {name = "data", dtype = "f32", shape = [4, 12]} : () -> tensor<4x12xf32> loc("tests/golden/dce/dead_params.nd":5:9)
    %live = "netc.inner_product"(%data) {name = "live", num_outputs = 6, params = {weight = @w_live, bias = @live.bias}} : (tensor<4x12xf32>) -> tensor<4x6xf32> loc("tests/golden/dce/dead_params.nd":6:3)
    %other = "netc.inner_product"(%live) {name = "other", num_outputs = 6, params = {weight = @other.weight, bias = @shared_b}} : (tensor<4x6xf32>) -> tensor<4x6xf32> loc("tests/golden/dce/dead_params.nd":9:3)
    "netc.output"(%other) : (tensor<4x6xf32>) -> () loc("tests/golden/dce/dead_params.nd":10:10)
  }) {sym_name = "net"} : () -> () loc("tests/golden/dce/dead_params.nd":4:9)
}) {source = "tests/golden/dce/dead_params.nd"} : () -> () loc("tests/golden/dce/dead_params.nd":1:1)
