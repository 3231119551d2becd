"builtin.module"() ({
  "netc.network"() ({
    %data = "netc.input"() {name = "data", dtype = "f32", shape = [2, 16]} : () -> tensor<*xf32> loc("tests/golden/flatten-blocks/endpoint_shortcut.nd":4:9)
    %sum = "netc.elementwise"() {name = "sum", parents = ["left/act", "right/act"]} : () -> tensor<*xf32> loc("tests/golden/flatten-blocks/endpoint_shortcut.nd":5:3)
    %left.fc = "netc.inner_product"() {name = "left/fc", num_outputs = 16, parents = ["data"]} : () -> tensor<*xf32> loc("tests/golden/flatten-blocks/endpoint_shortcut.nd":7:5)
    %left.act = "netc.tanh"() {name = "left/act", parents = ["left/fc"]} : () -> tensor<*xf32> loc("tests/golden/flatten-blocks/endpoint_shortcut.nd":8:5)
    %right.fc = "netc.inner_product"() {name = "right/fc", num_outputs = 16, parents = ["data"]} : () -> tensor<*xf32> loc("tests/golden/flatten-blocks/endpoint_shortcut.nd":11:5)
    %right.act = "netc.sigmoid"() {name = "right/act", parents = ["right/fc"]} : () -> tensor<*xf32> loc("tests/golden/flatten-blocks/endpoint_shortcut.nd":12:5)
    %peek = "netc.dropout"() {name = "peek", parents = ["left/fc"]} : () -> tensor<*xf32> loc("tests/golden/flatten-blocks/endpoint_shortcut.nd":14:3)
  }) {sym_name = "net"} : () -> () loc("tests/golden/flatten-blocks/endpoint_shortcut.nd":3:9)
}) {source = "tests/golden/flatten-blocks/endpoint_shortcut.nd"} : () -> () loc("tests/golden/flatten-blocks/endpoint_shortcut.nd":1:1)
