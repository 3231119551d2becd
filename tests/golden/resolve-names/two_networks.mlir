"builtin.module"() ({
  "netc.network"() ({
    %x = "netc.input"() {name = "x", dtype = "f32", shape = [2, 3]} : () -> tensor<*xf32> loc("tests/golden/resolve-names/two_networks.nd":3:9)
    %y = "netc.relu"(%x) {name = "y"} : (tensor<*xf32>) -> tensor<*xf32> loc("tests/golden/resolve-names/two_networks.nd":4:3)
  }) {sym_name = "first"} : () -> () loc("tests/golden/resolve-names/two_networks.nd":2:9)
  "netc.network"() ({
    %x_1 = "netc.input"() {name = "x", dtype = "f32", shape = [2, 3]} : () -> tensor<*xf32> loc("tests/golden/resolve-names/two_networks.nd":8:9)
    %y_1 = "netc.tanh"(%x_1) {name = "y"} : (tensor<*xf32>) -> tensor<*xf32> loc("tests/golden/resolve-names/two_networks.nd":7:3)
  }) {sym_name = "second"} : () -> () loc("tests/golden/resolve-names/two_networks.nd":6:9)
}) {source = "tests/golden/resolve-names/two_networks.nd"} : () -> () loc("tests/golden/resolve-names/two_networks.nd":1:1)
