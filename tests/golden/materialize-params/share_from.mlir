"builtin.module"() ({
  "netc.param"() {sym_name = "w_enc", init = "gaussian", std = 0.01, type = tensor<6x3xf32>} : () -> () loc("tests/golden/materialize-params/share_from.nd":5:53)
  "netc.param"() {sym_name = "enc.bias", type = tensor<3xf32>} : () -> () loc("tests/golden/materialize-params/share_from.nd":5:3)
  "netc.param"() {sym_name = "w_dec", share_from = @w_enc, type = tensor<3x6xf32>} : () -> () loc("tests/golden/materialize-params/share_from.nd":6:55)
  "netc.param"() {sym_name = "dec.bias", type = tensor<6xf32>} : () -> () loc("tests/golden/materialize-params/share_from.nd":6:3)
  "netc.network"() ({
    %x = "netc.input"() {name = "x", dtype = "f32", shape = [4, 6]} : () -> tensor<4x6xf32> loc("tests/golden/materialize-params/share_from.nd":4:9)
    %enc = "netc.inner_product"(%x) {name = "enc", num_outputs = 3, params = {weight = @w_enc, bias = @enc.bias}} : (tensor<4x6xf32>) -> tensor<4x3xf32> loc("tests/golden/materialize-params/share_from.nd":5:3)
    %dec = "netc.inner_product"(%enc) {name = "dec", num_outputs = 6, params = {weight = @w_dec, bias = @dec.bias}} : (tensor<4x3xf32>) -> tensor<4x6xf32> loc("tests/golden/materialize-params/share_from.nd":6:3)
  }) {sym_name = "net"} : () -> () loc("tests/golden/materialize-params/share_from.nd":3:9)
}) {source = "tests/golden/materialize-params/share_from.nd"} : () -> () loc("tests/golden/materialize-params/share_from.nd":1:1)
