"builtin.module"() ({
  "netc.network"() ({
    %data = "netc.input"() {name = "data", dtype = "f32", shape = [32, 100]} : () -> tensor<*xf32> loc("tests/golden/resolve-names/topological_order.nd":6:9)
    %side = "netc.sigmoid"(%data) {name = "side"} : (tensor<*xf32>) -> tensor<*xf32> loc("tests/golden/resolve-names/topological_order.nd":8:3)
    %fc1 = "netc.inner_product"(%data) {name = "fc1", num_outputs = 50} : (tensor<*xf32>) -> tensor<*xf32> loc("tests/golden/resolve-names/topological_order.nd":9:3)
    %act = "netc.relu"(%fc1) {name = "act"} : (tensor<*xf32>) -> tensor<*xf32> loc("tests/golden/resolve-names/topological_order.nd":7:3)
    %fc2 = "netc.inner_product"(%act) {name = "fc2", num_outputs = 10} : (tensor<*xf32>) -> tensor<*xf32> loc("tests/golden/resolve-names/topological_order.nd":5:3)
    %prob = "netc.softmax"(%fc2) {name = "prob"} : (tensor<*xf32>) -> tensor<*xf32> loc("tests/golden/resolve-names/topological_order.nd":4:3)
  }) {sym_name = "net"} : () -> () loc("tests/golden/resolve-names/topological_order.nd":3:9)
}) {source = "tests/golden/resolve-names/topological_order.nd"} : () -> () loc("tests/golden/resolve-names/topological_order.nd":1:1)
