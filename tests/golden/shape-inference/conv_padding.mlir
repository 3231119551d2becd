"builtin.module"() ({
  "netc.network"() ({
    %data = "netc.input"() {name = "data", dtype = "f32", shape = [8, 32, 32, 3]} : () -> tensor<8x32x32x3xf32> loc("tests/golden/shape-inference/conv_padding.nd":4:9)
    %valid = "netc.conv2d"(%data) {name = "valid", filter = [5, 5, 3, 16], padding = "VALID", strides = [1, 2, 2, 1]} : (tensor<8x32x32x3xf32>) -> tensor<8x14x14x16xf32> loc("tests/golden/shape-inference/conv_padding.nd":5:3)
    %same = "netc.conv2d"(%data) {name = "same", filter = [5, 5, 3, 16], padding = "SAME", strides = [1, 2, 2, 1]} : (tensor<8x32x32x3xf32>) -> tensor<8x16x16x16xf32> loc("tests/golden/shape-inference/conv_padding.nd":6:3)
    %explicit = "netc.conv2d"(%data) {name = "explicit", filter = [5, 5, 3, 16], padding = [1, 2], strides = [1, 2, 2, 1]} : (tensor<8x32x32x3xf32>) -> tensor<8x15x16x16xf32> loc("tests/golden/shape-inference/conv_padding.nd":7:3)
    %default = "netc.conv2d"(%data) {name = "default", filter = [3, 3, 3, 4]} : (tensor<8x32x32x3xf32>) -> tensor<8x32x32x4xf32> loc("tests/golden/shape-inference/conv_padding.nd":8:3)
    %rect = "netc.conv2d"(%data) {name = "rect", filter = [1, 7, 3, 8], padding = [0, 3]} : (tensor<8x32x32x3xf32>) -> tensor<8x32x32x8xf32> loc("tests/golden/shape-inference/conv_padding.nd":9:3)
    %pool_valid = "netc.maxpool"(%data) {name = "pool_valid", ksize = [1, 3, 3, 1], strides = [1, 2, 2, 1]} : (tensor<8x32x32x3xf32>) -> tensor<8x15x15x3xf32> loc("tests/golden/shape-inference/conv_padding.nd":10:3)
    %pool_same = "netc.avgpool"(%data) {name = "pool_same", ksize = [1, 3, 3, 1], padding = "SAME", strides = [1, 2, 2, 1]} : (tensor<8x32x32x3xf32>) -> tensor<8x16x16x3xf32> loc("tests/golden/shape-inference/conv_padding.nd":11:3)
  }) {sym_name = "net"} : () -> () loc("tests/golden/shape-inference/conv_padding.nd":3:9)
}) {source = "tests/golden/shape-inference/conv_padding.nd"} : () -> () loc("tests/golden/shape-inference/conv_padding.nd":1:1)
