// -----// IR Dump After SelectPhase (select-phase) //----- //
"builtin.module"() ({
  "netc.network"() ({
    %data = "netc.input"() {name = "data", dtype = "f32", shape = [2, 4, 4, 1]} : () -> tensor<*xf32> loc("tests/golden/print-ir-after-all/small.nd":3:9)
    "netc.block"() ({
      %c = "netc.conv2d"() {name = "c", filter = [3, 3, 1, 2], padding = "VALID", parents = []} : () -> tensor<*xf32> loc("tests/golden/print-ir-after-all/small.nd":5:5)
      %r = "netc.relu"() {name = "r", parents = ["c"]} : () -> tensor<*xf32> loc("tests/golden/print-ir-after-all/small.nd":6:5)
    }) {name = "b", endpoint = "r", parents = ["data"]} : () -> () loc("tests/golden/print-ir-after-all/small.nd":4:9)
    %fc = "netc.inner_product"() {name = "fc", num_outputs = 3, parents = ["b"]} : () -> tensor<*xf32> loc("tests/golden/print-ir-after-all/small.nd":8:3)
    "netc.output"() {parents = ["fc"]} : () -> () loc("tests/golden/print-ir-after-all/small.nd":9:10)
  }) {sym_name = "net"} : () -> () loc("tests/golden/print-ir-after-all/small.nd":2:9)
}) {source = "tests/golden/print-ir-after-all/small.nd"} : () -> () loc("tests/golden/print-ir-after-all/small.nd":1:1)

// -----// IR Dump After ExpandModelParallel (expand-model-parallel) //----- //
"builtin.module"() ({
  "netc.network"() ({
    %data = "netc.input"() {name = "data", dtype = "f32", shape = [2, 4, 4, 1]} : () -> tensor<*xf32> loc("tests/golden/print-ir-after-all/small.nd":3:9)
    "netc.block"() ({
      %c = "netc.conv2d"() {name = "c", filter = [3, 3, 1, 2], padding = "VALID", parents = []} : () -> tensor<*xf32> loc("tests/golden/print-ir-after-all/small.nd":5:5)
      %r = "netc.relu"() {name = "r", parents = ["c"]} : () -> tensor<*xf32> loc("tests/golden/print-ir-after-all/small.nd":6:5)
    }) {name = "b", endpoint = "r", parents = ["data"]} : () -> () loc("tests/golden/print-ir-after-all/small.nd":4:9)
    %fc = "netc.inner_product"() {name = "fc", num_outputs = 3, parents = ["b"]} : () -> tensor<*xf32> loc("tests/golden/print-ir-after-all/small.nd":8:3)
    "netc.output"() {parents = ["fc"]} : () -> () loc("tests/golden/print-ir-after-all/small.nd":9:10)
  }) {sym_name = "net"} : () -> () loc("tests/golden/print-ir-after-all/small.nd":2:9)
}) {source = "tests/golden/print-ir-after-all/small.nd"} : () -> () loc("tests/golden/print-ir-after-all/small.nd":1:1)

// -----// IR Dump After FlattenBlocks (flatten-blocks) //----- //
"builtin.module"() ({
  "netc.network"() ({
    %data = "netc.input"() {name = "data", dtype = "f32", shape = [2, 4, 4, 1]} : () -> tensor<*xf32> loc("tests/golden/print-ir-after-all/small.nd":3:9)
    %b.c = "netc.conv2d"() {name = "b/c", filter = [3, 3, 1, 2], padding = "VALID", parents = ["data"]} : () -> tensor<*xf32> loc("tests/golden/print-ir-after-all/small.nd":5:5)
    %b.r = "netc.relu"() {name = "b/r", parents = ["b/c"]} : () -> tensor<*xf32> loc("tests/golden/print-ir-after-all/small.nd":6:5)
    %fc = "netc.inner_product"() {name = "fc", num_outputs = 3, parents = ["b/r"]} : () -> tensor<*xf32> loc("tests/golden/print-ir-after-all/small.nd":8:3)
    "netc.output"() {parents = ["fc"]} : () -> () loc("tests/golden/print-ir-after-all/small.nd":9:10)
  }) {sym_name = "net"} : () -> () loc("tests/golden/print-ir-after-all/small.nd":2:9)
}) {source = "tests/golden/print-ir-after-all/small.nd"} : () -> () loc("tests/golden/print-ir-after-all/small.nd":1:1)

// -----// IR Dump After ResolveNames (resolve-names) //----- //
"builtin.module"() ({
  "netc.network"() ({
    %data = "netc.input"() {name = "data", dtype = "f32", shape = [2, 4, 4, 1]} : () -> tensor<*xf32> loc("tests/golden/print-ir-after-all/small.nd":3:9)
    %b.c = "netc.conv2d"(%data) {name = "b/c", filter = [3, 3, 1, 2], padding = "VALID"} : (tensor<*xf32>) -> tensor<*xf32> loc("tests/golden/print-ir-after-all/small.nd":5:5)
    %b.r = "netc.relu"(%b.c) {name = "b/r"} : (tensor<*xf32>) -> tensor<*xf32> loc("tests/golden/print-ir-after-all/small.nd":6:5)
    %fc = "netc.inner_product"(%b.r) {name = "fc", num_outputs = 3} : (tensor<*xf32>) -> tensor<*xf32> loc("tests/golden/print-ir-after-all/small.nd":8:3)
    "netc.output"(%fc) : (tensor<*xf32>) -> () loc("tests/golden/print-ir-after-all/small.nd":9:10)
  }) {sym_name = "net"} : () -> () loc("tests/golden/print-ir-after-all/small.nd":2:9)
}) {source = "tests/golden/print-ir-after-all/small.nd"} : () -> () loc("tests/golden/print-ir-after-all/small.nd":1:1)

// -----// IR Dump After ShapeInference (shape-inference) //----- //
"builtin.module"() ({
  "netc.network"() ({
    %data = "netc.input"() {name = "data", dtype = "f32", shape = [2, 4, 4, 1]} : () -> tensor<2x4x4x1xf32> loc("tests/golden/print-ir-after-all/small.nd":3:9)
    %b.c = "netc.conv2d"(%data) {name = "b/c", filter = [3, 3, 1, 2], padding = "VALID"} : (tensor<2x4x4x1xf32>) -> tensor<2x2x2x2xf32> loc("tests/golden/print-ir-after-all/small.nd":5:5)
    %b.r = "netc.relu"(%b.c) {name = "b/r"} : (tensor<2x2x2x2xf32>) -> tensor<2x2x2x2xf32> loc("tests/golden/print-ir-after-all/small.nd":6:5)
    %fc = "netc.inner_product"(%b.r) {name = "fc", num_outputs = 3} : (tensor<2x2x2x2xf32>) -> tensor<2x3xf32> loc("tests/golden/print-ir-after-all/small.nd":8:3)
    "netc.output"(%fc) : (tensor<2x3xf32>) -> () loc("tests/golden/print-ir-after-all/small.nd":9:10)
  }) {sym_name = "net"} : () -> () loc("tests/golden/print-ir-after-all/small.nd":2:9)
}) {source = "tests/golden/print-ir-after-all/small.nd"} : () -> () loc("tests/golden/print-ir-after-all/small.nd":1:1)

// -----// IR Dump After MaterializeParams (materialize-params) //----- //
"builtin.module"() ({
  "netc.param"() {sym_name = "b/c.weight", type = tensor<3x3x1x2xf32>} : () -> () loc("tests/golden/print-ir-after-all/small.nd":5:5)
  "netc.param"() {sym_name = "b/c.bias", type = tensor<2xf32>} : () -> () loc("tests/golden/print-ir-after-all/small.nd":5:5)
  "netc.param"() {sym_name = "fc.weight", type = tensor<8x3xf32>} : () -> () loc("tests/golden/print-ir-after-all/small.nd":8:3)
  "netc.param"() {sym_name = "fc.bias", type = tensor<3xf32>} : () -> () loc("tests/golden/print-ir-after-all/small.nd":8:3)
  "netc.network"() ({
    %data = "netc.input"() {name = "data", dtype = "f32", shape = [2, 4, 4, 1]} : () -> tensor<2x4x4x1xf32> loc("tests/golden/print-ir-after-all/small.nd":3:9)
    %b.c = "netc.conv2d"(%data) {name = "b/c", filter = [3, 3, 1, 2], padding = "VALID", params = {weight = @"b/c.weight", bias = @"b/c.bias"}} : (tensor<2x4x4x1xf32>) -> tensor<2x2x2x2xf32> loc("tests/golden/print-ir-after-all/small.nd":5:5)
    %b.r = "netc.relu"(%b.c) {name = "b/r"} : (tensor<2x2x2x2xf32>) -> tensor<2x2x2x2xf32> loc("tests/golden/print-ir-after-all/small.nd":6:5)
    %fc = "netc.inner_product"(%b.r) {name = "fc", num_outputs = 3, params = {weight = @fc.weight, bias = @fc.bias}} : (tensor<2x2x2x2xf32>) -> tensor<2x3xf32> loc("tests/golden/print-ir-after-all/small.nd":8:3)
    "netc.output"(%fc) : (tensor<2x3xf32>) -> () loc("tests/golden/print-ir-after-all/small.nd":9:10)
  }) {sym_name = "net"} : () -> () loc("tests/golden/print-ir-after-all/small.nd":2:9)
}) {source = "tests/golden/print-ir-after-all/small.nd"} : () -> () loc("tests/golden/print-ir-after-all/small.nd":1:1)

// -----// IR Dump After DeadLayerElimination (dce) //----- //
"builtin.module"() ({
  "netc.param"() {sym_name = "b/c.weight", type = tensor<3x3x1x2xf32>} : () -> () loc("tests/golden/print-ir-after-all/small.nd":5:5)
  "netc.param"() {sym_name = "b/c.bias", type = tensor<2xf32>} : () -> () loc("tests/golden/print-ir-after-all/small.nd":5:5)
  "netc.param"() {sym_name = "fc.weight", type = tensor<8x3xf32>} : () -> () loc("tests/golden/print-ir-after-all/small.nd":8:3)
  "netc.param"() {sym_name = "fc.bias", type = tensor<3xf32>} : () -> () loc("tests/golden/print-ir-after-all/small.nd":8:3)
  "netc.network"() ({
    %data = "netc.input"() {name = "data", dtype = "f32", shape = [2, 4, 4, 1]} : () -> tensor<2x4x4x1xf32> loc("tests/golden/print-ir-after-all/small.nd":3:9)
    %b.c = "netc.conv2d"(%data) {name = "b/c", filter = [3, 3, 1, 2], padding = "VALID", params = {weight = @"b/c.weight", bias = @"b/c.bias"}} : (tensor<2x4x4x1xf32>) -> tensor<2x2x2x2xf32> loc("tests/golden/print-ir-after-all/small.nd":5:5)
    %b.r = "netc.relu"(%b.c) {name = "b/r"} : (tensor<2x2x2x2xf32>) -> tensor<2x2x2x2xf32> loc("tests/golden/print-ir-after-all/small.nd":6:5)
    %fc = "netc.inner_product"(%b.r) {name = "fc", num_outputs = 3, params = {weight = @fc.weight, bias = @fc.bias}} : (tensor<2x2x2x2xf32>) -> tensor<2x3xf32> loc("tests/golden/print-ir-after-all/small.nd":8:3)
    "netc.output"(%fc) : (tensor<2x3xf32>) -> () loc("tests/golden/print-ir-after-all/small.nd":9:10)
  }) {sym_name = "net"} : () -> () loc("tests/golden/print-ir-after-all/small.nd":2:9)
}) {source = "tests/golden/print-ir-after-all/small.nd"} : () -> () loc("tests/golden/print-ir-after-all/small.nd":1:1)

