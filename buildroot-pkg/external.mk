include $(sort $(wildcard $(BR2_EXTERNAL_CROSSPROF_PATH)/package/*/*.mk))
