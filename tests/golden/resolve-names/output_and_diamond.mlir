"builtin.module"() ({
  "netc.network"() ({
    %data = "netc.input"() {name = "data", dtype = "f32", shape = [4, 6]} : () -> tensor<*xf32> loc("tests/golden/resolve-names/output_and_diamond.nd":6:9)
    %a = "netc.tanh"(%data) {name = "a"} : (tensor<*xf32>) -> tensor<*xf32> loc("tests/golden/resolve-names/output_and_diamond.nd":7:3)
    %b = "netc.sigmoid"(%data) {name = "b"} : (tensor<*xf32>) -> tensor<*xf32> loc("tests/golden/resolve-names/output_and_diamond.nd":8:3)
    %loss = "netc.euclidean_loss"(%b, %a) {name = "loss"} : (tensor<*xf32>, tensor<*xf32>) -> tensor<*xf32> loc("tests/golden/resolve-names/output_and_diamond.nd":5:3)
    %prob = "netc.softmax"(%a) {name = "prob"} : (tensor<*xf32>) -> tensor<*xf32> loc("tests/golden/resolve-names/output_and_diamond.nd":9:3)
    "netc.output"(%loss, %prob) : (tensor<*xf32>, tensor<*xf32>) -> () loc("tests/golden/resolve-names/output_and_diamond.nd":4:10)
  }) {sym_name = "net"} : () -> () loc("tests/golden/resolve-names/output_and_diamond.nd":3:9)
}) {source = "tests/golden/resolve-names/output_and_diamond.nd"} : () -> () loc("tests/golden/resolve-names/output_and_diamond.nd":1:1)
