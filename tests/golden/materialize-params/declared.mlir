"builtin.module"() ({
  "netc.param"() {sym_name = "emb", high = 0.1, init = "uniform", low = -0.1, type = tensor<16x8xf32>} : () -> () loc("tests/golden/materialize-params/declared.nd":4:7)
  "netc.param"() {sym_name = "zero_bias", init = "constant", type = tensor<8xf32>, value = 0} : () -> () loc("tests/golden/materialize-params/declared.nd":5:7)
  "netc.param"() {sym_name = "never_used", type = tensor<3xf32>} : () -> () loc("tests/golden/materialize-params/declared.nd":6:7)
  "netc.param"() {sym_name = "b.bias", type = tensor<8xf32>} : () -> () loc("tests/golden/materialize-params/declared.nd":10:3)
  "netc.network"() ({
    %x = "netc.input"() {name = "x", dtype = "f32", shape = [2, 16]} : () -> tensor<2x16xf32> loc("tests/golden/materialize-params/declared.nd":8:9)
    %a = "netc.inner_product"(%x) {name = "a", num_outputs = 8, params = {weight = @emb, bias = @zero_bias}} : (tensor<2x16xf32>) -> tensor<2x8xf32> loc("tests/golden/materialize-params/declared.nd":9:3)
    %b = "netc.inner_product"(%x) {name = "b", num_outputs = 8, params = {weight = @emb, bias = @b.bias}} : (tensor<2x16xf32>) -> tensor<2x8xf32> loc("tests/golden/materialize-params/declared.nd":10:3)
  }) {sym_name = "net"} : () -> () loc("tests/golden/materialize-params/declared.nd":7:9)
}) {source = "tests/golden/materialize-params/declared.nd"} : () -> () loc("tests/golden/materialize-params/declared.nd":1:1)
