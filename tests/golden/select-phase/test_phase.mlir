"builtin.module"() ({
  "netc.network"() ({
    %data = "netc.input"() {name = "data", dtype = "f32", shape = [8, 16]} : () -> tensor<*xf32> loc("tests/golden/select-phase/test_phase.nd":4:9)
    %fc = "netc.inner_product"() {name = "fc", num_outputs = 4, parents = ["data"]} : () -> tensor<*xf32> loc("tests/golden/select-phase/test_phase.nd":6:3)
    %prob = "netc.softmax"() {name = "prob", parents = ["fc"]} : () -> tensor<*xf32> loc("tests/golden/select-phase/test_phase.nd":8:3)
  }) {sym_name = "net"} : () -> () loc("tests/golden/select-phase/test_phase.nd":3:9)
}) {source = "tests/golden/select-phase/test_phase.nd"} : () -> () loc("tests/golden/select-phase/test_phase.nd":1:1)
