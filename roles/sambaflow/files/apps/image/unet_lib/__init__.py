# Written for the aitestbed emulator of the ALCF AI Testbed (not SambaNova's code).
"""The UNet shared by the SN30 app (segmentation/compile.py, hook.py) and the SN10 app
(unet/unet.py, unet_hook.py): the model, the kaggle_3m data and the train loop."""
